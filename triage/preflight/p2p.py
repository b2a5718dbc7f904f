"""Pairwise GPU peer-to-peer round-trip check (standalone: needs only PyTorch).

For every ordered pair of GPUs (src, dst) it fills a buffer on src with a known pattern, copies it
to dst, copies it back to src and counts elements that differ, the test that exposed P2P DMA
corruption behind an IOMMU in the field (garbage output and NaN while every GPU alone was fine).
Bounded in time: pairs left when the budget runs out are reported as not checked.

    python -m triage.preflight.p2p [--mib 64] [--timeout 60]      # prints JSON
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any


def p2p_check(mib: int = 64, timeout_s: float = 60.0) -> dict[str, Any]:
    """Run the check; never raises (a missing torch or GPU is reported in the result)."""
    started = time.monotonic()
    try:
        import torch  # type: ignore[import-not-found, unused-ignore]
    except ImportError:
        return {"ok": None, "skipped": "PyTorch is not installed", "pairs": []}
    if not torch.cuda.is_available():
        return {"ok": None, "skipped": "no CUDA device visible to PyTorch", "pairs": []}
    count = torch.cuda.device_count()
    result: dict[str, Any] = {
        "ok": None,
        "devices": count,
        "mib": mib,
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "names": [torch.cuda.get_device_name(i) for i in range(count)],
        "pairs": [],
    }
    if count < 2:
        result["skipped"] = f"{count} GPU visible: the peer check needs at least 2"
        return result
    n = (mib << 20) // 4
    bad = 0
    for src in range(count):
        ref = (
            torch.arange(n, dtype=torch.int64, device=f"cuda:{src}") * 2654435761 % 2147483647
        ).to(torch.int32)
        for dst in range(count):
            if src == dst:
                continue
            pair: dict[str, Any] = {"src": src, "dst": dst}
            if time.monotonic() - started > timeout_s:
                pair["checked"] = False
                pair["why"] = "time budget spent"
                result["pairs"].append(pair)
                continue
            try:
                pair["peer_access"] = bool(torch.cuda.can_device_access_peer(src, dst))
                t0 = time.monotonic()
                there = ref.to(f"cuda:{dst}")
                back = there.to(f"cuda:{src}")
                torch.cuda.synchronize(src)
                torch.cuda.synchronize(dst)
                wrong = int((back != ref).sum().item())
                wrong_there = int((there.to(f"cuda:{src}") != ref).sum().item())
                secs = time.monotonic() - t0
                pair.update(
                    checked=True,
                    elements=n,
                    wrong=wrong,
                    wrong_on_dst=wrong_there,
                    seconds=round(secs, 4),
                    gib_per_s=round(2 * n * 4 / max(secs, 1e-9) / (1 << 30), 2),
                )
                if wrong or wrong_there:
                    bad += 1
            except Exception as exc:  # a failing copy is the finding, not a crash
                pair.update(checked=False, why=f"{type(exc).__name__}: {exc}")
                bad += 1
            result["pairs"].append(pair)
    checked = [p for p in result["pairs"] if p.get("checked")]
    result["ok"] = bad == 0 and len(checked) == count * (count - 1)
    result["corrupt_pairs"] = [
        f"{p['src']}->{p['dst']}"
        for p in result["pairs"]
        if p.get("wrong") or p.get("wrong_on_dst")
    ]
    result["seconds"] = round(time.monotonic() - started, 3)
    return result


def summary_lines(result: dict[str, Any]) -> list[str]:
    if result.get("skipped"):
        return [f"p2p check: not run ({result['skipped']})"]
    lines = [
        f"p2p check: {result.get('devices')} GPUs, {result.get('mib')} MiB per pair: "
        + ("all pairs clean" if result.get("ok") else "PROBLEMS")
    ]
    for p in result.get("pairs", []):
        if p.get("checked"):
            lines.append(
                f"  GPU{p['src']} -> GPU{p['dst']}: peer_access={p['peer_access']} "
                f"wrong={p['wrong']} wrong_on_dst={p['wrong_on_dst']} "
                f"{p['gib_per_s']} GiB/s"
            )
        else:
            lines.append(f"  GPU{p['src']} -> GPU{p['dst']}: not checked ({p.get('why')})")
    return lines


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="Pairwise GPU P2P round-trip check")
    ap.add_argument("--mib", type=int, default=64)
    ap.add_argument("--timeout", type=float, default=60.0)
    ap.add_argument("--text", action="store_true", help="print a summary instead of JSON")
    args = ap.parse_args(argv)
    result = p2p_check(args.mib, args.timeout)
    if args.text:
        print("\n".join(summary_lines(result)))
    else:
        print(json.dumps(result, indent=1))
    return 0 if result.get("ok") in (True, None) else 1


if __name__ == "__main__":
    sys.exit(main())
