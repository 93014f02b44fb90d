"""What ``--fast`` adds, never the maths of the default path: the image's Fourier basis (``basis``), the style model
with bf16, channels-last and the fused Gram (``fast``), its kernels (``kernels``), what the hardware can do
(``hardware``, ``cpuinfo``), what ``--fast`` turns on (``speed``, torch-free: the only reader of ``StyleConfig.fast``)."""
