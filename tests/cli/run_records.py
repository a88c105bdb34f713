"""Run recordings (memscope-run v1, include/memscope/watched_run.hpp) written by hand, for the
tests of `memscope report` and `memscope diff` that must not depend on what a machine's processes
do.
"""

from __future__ import annotations

import json
from pathlib import Path

MiB = 1 << 20


def run_record(stages: dict[str, int], processes: dict[str, int], duration: float = 10.0,
               peak: int = 900 * MiB, ranks: dict[str, int] | None = None) -> dict:
    """A run with the given stages (name -> tree RSS peak) and processes (command -> peak RSS),
    `ranks` naming the rank of some processes (command -> rank)."""
    t = [0.1 * i for i in range(int(duration * 10) + 1)]
    stage_list = []
    marks = []
    begin = 0.5
    for name, rss in stages.items():
        end = begin + 2.0
        stage_list.append({"name": name, "pid": 100, "begin": begin, "end": end,
                           "tree_rss_peak": rss, "gpu_peak": -1,
                           "metrics": {"cpu_peaked_delta": rss // 2}})
        marks.append({"t": begin, "pid": 100, "kind": "begin", "stage": name, "hwm": -1,
                      "metrics": {}})
        marks.append({"t": end, "pid": 100, "kind": "end", "stage": name, "hwm": rss,
                      "metrics": {"cpu_peaked_delta": rss // 2}})
        begin = end + 0.5
    process_list = []
    for i, (command, rss) in enumerate(processes.items()):
        process_list.append({"pid": 100 + i, "ppid": 99 if i == 0 else 100, "command": command,
                             "start": 0.0, "end": duration, "peak_rss": rss,
                             "peak_rss_source": "VmHWM", "peak_gpu": -1,
                             "exit_code": 0 if i == 0 else None, "exit_signal": None,
                             "t": t, "rss": [rss // 2] * len(t), "gpu": []})
        if ranks and command in ranks:
            process_list[-1]["rank"] = {"rank": ranks[command], "variable": "RANK",
                                        "local_rank": ranks[command], "world_size": len(ranks),
                                        "local_world_size": len(ranks)}
    return {"format": "memscope-run", "version": 1, "command": ["python3", "train.py"],
            "start_unix": 1.7e9, "duration": duration, "interval": 0.1, "exit_code": 0,
            "child_exit_code": 0, "child_signal": None, "gpu_status": "no GPU watched (test)",
            "host_total": 64 << 30, "cgroup_limit": -1, "t": t,
            "tree_rss": [peak // 2] * len(t), "tree_gpu": [], "gpus": [],
            "processes": process_list, "marks": marks, "stages": stage_list,
            "peak_tree_rss": peak, "peak_tree_rss_t": 3.0}


def write_run(path: Path, **kwargs) -> Path:
    path.write_text(json.dumps(run_record(**kwargs), indent=1))
    return path
