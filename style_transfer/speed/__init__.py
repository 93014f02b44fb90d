"""Opt-in paths that change time or memory, never the maths: bf16, channels-last and the fused Gram (``fast``),
evaluations over crops (``tiling``, ``crops``), memory estimates before a run (``memory``)."""
