"""The host's share of an eager PyTorch step, for the runtime's modeled host clock: what each
operator costs to launch is priced with the operator (kernels.price); what happens around
operators is reported here: a backward pass starting (autograd's engine hands the graph to its
device threads and waits), an nn.Module call, an optimizer step's Python loop over its parameters.
The costs themselves are the kernel model's (planner/kernel_rates.cpp)."""

import torch

from fakegpu.torch_hook import bridge as B

_bridge = None
_graph_task = None  # torch._C._current_graph_task_id: -1 outside a backward pass
_last_task = -1
_kernel_depth = 0  # > 0 while fakegpu's own kernel code runs (it calls modules no GPU kernel would)


class InsideKernel:
    """Marks fakegpu's CPU work for one operator: FlexAttention's score and mask functions are
    fx GraphModules that the GPU kernel inlines, so calling them is no module call of the program."""

    def __enter__(self):
        global _kernel_depth
        _kernel_depth += 1

    def __exit__(self, *exc):
        global _kernel_depth
        _kernel_depth -= 1


INSIDE_KERNEL = InsideKernel()


def backward_flags():
    """IN_BACKWARD when autograd's engine runs the current operator (charging the backward pass's
    start to the host the first time a pass is seen), else 0."""
    global _last_task
    if _graph_task is None:
        return 0
    task = _graph_task()
    if task == -1:
        return 0
    if task != _last_task:
        _last_task = task
        _bridge.host_event(B.BACKWARD_CALL)
    return B.IN_BACKWARD


def install():
    global _bridge, _graph_task
    _bridge = bridge = B.find()
    _graph_task = getattr(torch._C, "_current_graph_task_id", None)
    compiling = torch.compiler.is_compiling

    def module_called(module, args):
        # A compiled graph runs its modules' operators without their calls.
        if not compiling() and not _kernel_depth:
            bridge.host_event(B.MODULE_CALL, 1)

    def optimizer_step(optimizer, args, kwargs):
        # Its Python loop handles each entry of each parameter's state (SGD's momentum: one;
        # Adam's step and two moments: three); before the first step the state is still empty.
        entries = 0
        for group in optimizer.param_groups:
            for p in group["params"]:
                if p.grad is not None:
                    entries += max(1, len(optimizer.state.get(p, ())))
        bridge.host_event(B.OPTIMIZER_STEP, entries)

    torch.nn.modules.module.register_module_forward_pre_hook(module_called)
    from torch.optim.optimizer import register_optimizer_step_pre_hook

    register_optimizer_step_pre_hook(optimizer_step)
