"""De novo motif discovery on one device: the window layout, batched Gibbs chains, PROJECTION trials with
batched EM, and the (l, d) refinement (NumPy / CuPy arrays, numba, CUDA kernels that run a whole batch in
one launch)."""
from workers.discover.gibbs import ChainResult, distinct_best, profile_score, random_starts, run_chains
from workers.discover.gpu import (Climbed, best_windows_device, climb_from_sites, consensus_keys,
                                  ld_climb_device, ld_proxy_device, pack_words, run_chains_device,
                                  shift_consensus_device, unpack_words)
from workers.discover.projection import (EMResult, ProjectionParameters, choose_parameters, em_refine, em_sites,
                                         projection_seeds, random_positions)
from workers.discover.refine import ld_local_search, ld_proxy_order, ld_score, ld_sites, shifted_consensus
from workers.discover.windows import Windows, background, consensus, make_windows, relative_entropy, window_codes

__all__ = ["ChainResult", "Climbed", "EMResult", "ProjectionParameters", "Windows", "background",
           "best_windows_device", "choose_parameters", "climb_from_sites", "consensus", "consensus_keys",
           "distinct_best", "em_refine", "em_sites", "ld_climb_device", "ld_local_search", "ld_proxy_device",
           "ld_proxy_order", "ld_score", "ld_sites", "make_windows", "pack_words", "profile_score",
           "projection_seeds", "random_positions", "random_starts", "relative_entropy", "run_chains",
           "run_chains_device", "shift_consensus_device", "shifted_consensus", "unpack_words", "window_codes"]
