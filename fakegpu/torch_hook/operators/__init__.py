"""CUDA kernels of their own for operators that no CPU kernel computes as CUDA does: flash and
memory-efficient attention (attention.py, efficient_attention.py, with attention_math.py for
dropout and bias gradients), FlexAttention (flex_attention.py), nn.SyncBatchNorm's CUDA-only
operators (sync_batch_norm.py) and a few more (fallbacks.py). Each module's install() registers
its kernels through kernels.py."""
