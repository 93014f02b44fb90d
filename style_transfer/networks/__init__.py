"""The networks: VGG layouts and preprocessing (``vgg``), every weights format (torchvision's and Caffe state dicts
there, ``onnx`` with our protobuf reader ``onnx_graph``, the quantised original VGG19 ``quantised``), what a weights
file tells without torch (``weights``), and torchvision's download with the offline fallback (``download``)."""
