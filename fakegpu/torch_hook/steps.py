"""Where a PyTorch program's training steps are, for the step figures in fakegpu's report.

A step ends at each optimizer step (the outermost, where one optimizer steps others). A program
that marks its steps with NVTX ranges whose name says "step" or "iter"
(torch.cuda.nvtx.range_push/range_pop, or torch.cuda.nvtx.range) gets those ranges instead. Each
mark goes onto the current stream, so it lands at the modeled time the GPU reaches that point. At
exit, what the runtime logged and PyTorch's memory peaks go to the coordinator.
"""

import atexit
import re
import sys
import threading

import torch

from fakegpu.torch_hook import bridge as B
from fakegpu.torch_hook import memory

_STEP_NAME = re.compile(r"step|iter", re.IGNORECASE)


def install():
    try:
        _install()
    except Exception as e:  # the figures are worth less than the user's job
        sys.stderr.write(f"fakegpu: step marks are off, so the report has no step figures: {e}\n")


def _install():
    bridge = B.find()
    if bridge is None or not bridge.coordinator_linked():
        return  # not fakegpu's runtime and NCCL: nothing to mark steps on
    # Per thread, as NVTX nests them: for each open range, whether it is a step; and how many
    # optimizer steps are under way.
    ranges = threading.local()
    saw_step_range = False

    def mark(begin):
        if torch.cuda.is_initialized():
            bridge.mark_step(torch.cuda.current_stream().cuda_stream, begin)

    # An optimizer that steps others (torchtitan's container of one optimizer per model part is an
    # Optimizer itself) is one step: only the outermost optimizer step ends it.
    def before_optimizer_step(optimizer, args, kwargs):
        ranges.optimizer_depth = getattr(ranges, "optimizer_depth", 0) + 1

    def after_optimizer_step(optimizer, args, kwargs):
        ranges.optimizer_depth = max(0, getattr(ranges, "optimizer_depth", 1) - 1)
        if not saw_step_range and ranges.optimizer_depth == 0:
            mark(False)

    from torch.optim.optimizer import register_optimizer_step_post_hook, register_optimizer_step_pre_hook

    register_optimizer_step_pre_hook(before_optimizer_step)
    register_optimizer_step_post_hook(after_optimizer_step)

    nvtx = torch.cuda.nvtx
    push, pop = nvtx.range_push, nvtx.range_pop

    def range_push(msg):
        nonlocal saw_step_range
        stack = ranges.__dict__.setdefault("open", [])
        step = bool(_STEP_NAME.search(str(msg))) and not any(stack)  # the outermost step range counts
        stack.append(step)
        if step:
            saw_step_range = True
            mark(True)
        return push(msg)

    def range_pop():
        depth = pop()
        stack = ranges.__dict__.setdefault("open", [])
        if stack and stack.pop():
            mark(False)
        return depth

    nvtx.range_push, nvtx.range_pop = range_push, range_pop

    def flush_at_exit():
        if torch.cuda.is_initialized():  # otherwise the GPU did nothing, and there is nothing to send
            memory.report_peaks()
            bridge.flush_to_coordinator()

    atexit.register(flush_at_exit)
