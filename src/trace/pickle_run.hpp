// run_pickle: the safe pickle reader's opcode loop, for read_pickle() and for readers that walk
// the machine's graph in place instead of building a PickleValue (read_torch_snapshot_pickle).
#pragma once

#include <functional>
#include <string_view>

#include "memscope/pickle.hpp"
#include "trace/pickle_machine.hpp"

namespace memscope::detail {

// Runs the pickle in `data` on a machine bounded by `limits` and calls at_stop(machine, root) at
// its STOP opcode. A PickleProblem, from the opcodes or from at_stop, becomes a TraceFormatError
// naming `source`, the opcode and its offset; other exceptions pass through.
void run_pickle(std::string_view data, std::string_view source, const PickleLimits& limits,
                const std::function<void(PickleMachine&, const Ref&)>& at_stop);

}  // namespace memscope::detail
