"""The networks: VGG layouts and preprocessing (``vgg``), every weights format (torchvision's and Caffe state dicts
there, ``onnx`` reading the graph with ``config.onnx_graph``, the quantised original VGG19 ``quantised``), and
torchvision's download with the offline fallback (``download``). What a weights file tells without torch is
``config.weights``, which ``StyleConfig``'s checks ask."""
