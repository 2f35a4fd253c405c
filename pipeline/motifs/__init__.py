"""Motif input and the PWM model (the former ``pipeline/motifs.py``, moved whole into ``model``; split next)."""
from pipeline.motifs.model import (FORMATS, NRDB_DNA, Motif, MotifError, duplicate_ids, format_jaspar, format_meme,
                                   motif_probabilities, motifs_checksum, pwm_from_motif, read_background, read_motifs,
                                   reverse_complement, select_motifs)

__all__ = ["FORMATS", "NRDB_DNA", "Motif", "MotifError", "duplicate_ids", "format_jaspar", "format_meme",
           "motif_probabilities", "motifs_checksum", "pwm_from_motif", "read_background", "read_motifs",
           "reverse_complement", "select_motifs"]
