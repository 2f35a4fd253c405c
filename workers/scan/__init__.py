"""Multi-PWM scanning of one block: the plan (matrices tiled by length, thresholds folded in), the CPU scan
(Slices Strategy tables, BLAMM BLAS products; numba) and the GPU scan (tensor cores; CUDA), both rescoring
their candidates in float64 so that every device reports the same hits."""
from workers.scan.block import scan_block, scan_blocks
from workers.scan.cpu import slice_tiles
from workers.scan.plan import BlockHits, ScanPlan, make_plan, plan_tiles, valid_windows

__all__ = ["BlockHits", "ScanPlan", "make_plan", "plan_tiles", "scan_block", "scan_blocks", "slice_tiles",
           "valid_windows"]
