"""CUDA tensors shared between processes with torch.multiprocessing, as on a GPU: the producer
puts a tensor it just computed on a queue (CUDA IPC: a memory handle and an event handle), the
consumer computes on the same device memory and writes into it, and the producer sees the write.
Run under fgpu; prints one line, or exits 1 naming what differs."""

import sys

import torch
import torch.multiprocessing as mp


def consumer(tensors, results):
    shared = tensors.get()
    results.put(float((shared * 2).sum()))
    shared[0] = -1.0  # the same memory: the producer sees this
    del shared
    results.put("done")


def main():
    context = mp.get_context("spawn")
    tensors, results = context.Queue(), context.Queue()
    child = context.Process(target=consumer, args=(tensors, results))
    child.start()
    x = torch.arange(10.0, device="cuda") * 3  # queued on the stream just before it is shared
    tensors.put(x)
    computed, done = results.get(timeout=300), results.get(timeout=300)
    child.join(timeout=60)
    expected = float((torch.arange(10.0) * 6).sum())
    bad = []
    if computed != expected:
        bad.append(f"the consumer computed {computed}, not {expected}")
    if done != "done" or x[0].item() != -1.0:
        bad.append(f"the consumer's write is not in the producer's tensor ({x[0].item()})")
    if child.exitcode != 0:
        bad.append(f"the consumer exited with {child.exitcode}")
    if bad:
        print("shared CUDA tensors: " + "; ".join(bad), flush=True)
        sys.exit(1)
    print(f"shared CUDA tensors: the consumer computed {computed} on the producer's memory and wrote back", flush=True)


if __name__ == "__main__":
    main()
