"""Benchmark: our scaled_dot_product_attention against PyTorch's fused one, time and memory vs length.

Prints, for each sequence length, the median time of each (same inputs, same run) and their ratio,
and the peak extra memory each allocates on the CPU (torch.profiler's memory accounting).
Usage: .venv/bin/python scripts/bench_attention.py [--impl reference|learner] [--lengths 64 128 ...]
"""
from __future__ import annotations

import argparse

import torch
import torch.nn.functional as F

from course_lib.provided.bench import median_seconds, peak_bytes
from course_lib.provided.loader import load_impl


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--impl", default="reference", choices=["reference", "learner"])
    parser.add_argument("--lengths", type=int, nargs="+", default=[64, 128, 256, 512, 1024])
    parser.add_argument("--batch", type=int, default=2)
    parser.add_argument("--heads", type=int, default=8)
    parser.add_argument("--d-k", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    ours = load_impl(args.impl).attention.scaled_dot_product_attention
    torch.manual_seed(0)
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, batch {args.batch}, "
          f"heads {args.heads}, d_k {args.d_k}, float32, CPU")
    print(f"{'seq':>6} {'ours ms':>9} {'fused ms':>9} {'time ratio':>10} {'ours MiB':>9} {'fused MiB':>10} {'mem ratio':>9}")
    for n in args.lengths:
        q, k, v = (torch.randn(args.batch, args.heads, n, args.d_k) for _ in range(3))  # (batch, heads, seq, d_k)
        with torch.no_grad():
            t_ours = median_seconds(lambda: ours(q, k, v), args.repeats)
            t_fused = median_seconds(lambda: F.scaled_dot_product_attention(q, k, v), args.repeats)
            m_ours = peak_bytes(lambda: ours(q, k, v))
            m_fused = peak_bytes(lambda: F.scaled_dot_product_attention(q, k, v))
        print(f"{n:>6} {t_ours * 1e3:>9.2f} {t_fused * 1e3:>9.2f} {t_ours / t_fused:>10.2f} "
              f"{m_ours / 2**20:>9.1f} {m_fused / 2**20:>10.1f} {m_ours / max(m_fused, 1):>9.2f}")


if __name__ == "__main__":
    main()
