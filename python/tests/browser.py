"""Loading an HTML page in headless Chromium, for tests of the HTML memscope writes or feeds to
other tools (PyTorch's memory viewer, reports).

load_page() serves the page and any files beside it from a temporary folder over HTTP on
127.0.0.1 (module scripts do not load from file://), opens it in headless Chromium, lets it run
for a bounded (virtual) time, and returns the DOM as the page left it, the console messages,
and the page's errors: uncaught exceptions, rejected promises, console.error calls, and
scripts, styles or images that failed to load. The last are caught by a small script put at
the top of the page, since Chromium logs no console message for a module import that cannot be
fetched; they are listed in the DOM under <pre id="memscope-page-errors">.

chromium() names the browser or None; tests skip with chromium_missing_reason().
"""

from __future__ import annotations

import html
import http.server
import json
import os
import re
import shutil
import subprocess
import tempfile
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional, Union

_ERROR_HOOK = """<script>
(() => {
  const errors = [];
  function show() {
    let pre = document.getElementById('memscope-page-errors');
    if (!pre) {
      pre = document.createElement('pre');
      pre.id = 'memscope-page-errors';
      pre.hidden = true;
      (document.body || document.documentElement).appendChild(pre);
    }
    pre.textContent = JSON.stringify(errors);
  }
  function add(text) {
    errors.push(text);
    if (document.body) show(); else document.addEventListener('DOMContentLoaded', show);
  }
  window.addEventListener('error', e => {
    const t = e.target;
    if (t && t !== window && t.tagName) {
      add(`failed to load <${t.tagName.toLowerCase()}> ${t.src || t.href || '(inline)'}`);
    } else {
      add(String(e.message));  // Chromium's text: "Uncaught TypeError: ..."
    }
  }, true);
  window.addEventListener('unhandledrejection', e => add(`unhandled rejection: ${e.reason}`));
  const error = console.error.bind(console);
  console.error = (...args) => {
    add(`console.error: ${args.map(String).join(' ')}`);
    error(...args);
  };
})();
</script>
"""

# One console message in Chromium's log; a message may span lines.
_CONSOLE = re.compile(r':INFO:CONSOLE[^\]]*\] "(.*?)", source: ', re.DOTALL)


@dataclass
class Page:
    dom: str
    console: list[str] = field(default_factory=list)  # every console message, in order
    errors: list[str] = field(default_factory=list)  # what went wrong in the page
    screenshot: Optional[Path] = None


def chromium() -> Optional[str]:
    for name in ("chromium", "chromium-browser", "google-chrome", "chrome"):
        path = shutil.which(name)
        if path:
            return path
    return None


def chromium_missing_reason() -> str:
    return "headless Chromium is not installed (Debian package 'chromium'; scripts/bootstrap)"


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass


def _serve(folder: Path) -> http.server.ThreadingHTTPServer:
    def handler(*args: object, **kwargs: object) -> _Quiet:
        return _Quiet(*args, directory=str(folder), **kwargs)  # type: ignore[arg-type]

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def _with_hook(page: str) -> str:
    match = re.search(r"<head[^>]*>", page, re.IGNORECASE)
    if match:
        return page[: match.end()] + _ERROR_HOOK + page[match.end():]
    return _ERROR_HOOK + page


def load_page(
    page: str,
    files: Optional[dict[str, Union[bytes, str, Path]]] = None,
    *,
    budget_ms: int = 10000,
    timeout_s: float = 120,
    screenshot: Optional[Path] = None,
) -> Page:
    """Loads `page` (HTML text) with `files` (name -> content or a path to copy) beside it."""
    browser = chromium()
    if browser is None:
        raise RuntimeError(chromium_missing_reason())
    with tempfile.TemporaryDirectory(prefix="memscope-page-") as tmp:
        folder = Path(tmp)
        (folder / "index.html").write_text(_with_hook(page), encoding="utf-8")
        for name, content in (files or {}).items():
            target = folder / name
            target.parent.mkdir(parents=True, exist_ok=True)
            if isinstance(content, Path):
                shutil.copyfile(content, target)
            elif isinstance(content, bytes):
                target.write_bytes(content)
            else:
                target.write_text(content, encoding="utf-8")
        server = _serve(folder)
        try:
            url = f"http://127.0.0.1:{server.server_address[1]}/index.html"
            # --no-sandbox: Chromium's sandbox refuses to run as root (CI containers).
            base = [browser, "--headless=new", "--no-sandbox", "--disable-gpu", "--no-first-run",
                    "--disable-extensions", f"--user-data-dir={folder / 'profile'}",
                    f"--virtual-time-budget={budget_ms}"]
            env = dict(os.environ, LANG="C.UTF-8")
            run = subprocess.run(
                [*base, "--enable-logging=stderr", "--v=0", "--dump-dom", url],
                capture_output=True, timeout=timeout_s, env=env, check=False)
            if screenshot is not None:
                screenshot.parent.mkdir(parents=True, exist_ok=True)
                subprocess.run([*base, "--window-size=1280,900", f"--screenshot={screenshot}", url],
                               capture_output=True, timeout=timeout_s, env=env, check=False)
        finally:
            server.shutdown()
            server.server_close()
    dom = run.stdout.decode("utf-8", "replace")
    if run.returncode != 0 and not dom:
        raise RuntimeError(f"chromium exited with {run.returncode}: "
                           f"{run.stderr.decode('utf-8', 'replace')[-2000:]}")
    console = _CONSOLE.findall(run.stderr.decode("utf-8", "replace"))
    errors = [c for c in console if c.startswith("Uncaught")]
    m = re.search(r'<pre id="memscope-page-errors"[^>]*>(.*?)</pre>', dom, re.DOTALL)
    if m:
        errors += [e for e in json.loads(html.unescape(m.group(1))) if e not in errors]
    shot = screenshot if screenshot is not None and screenshot.exists() else None
    return Page(dom=dom, console=console, errors=errors, screenshot=shot)
