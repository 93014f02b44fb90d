"""The networks and their weights where they were before the package was split into layers: now ``core.vgg``."""

from .core.vgg import (CAFFE_MEAN_BGR, CAFFE_SCALES, DOWNLOAD_TIMEOUT_S, IMAGENET_MEAN, IMAGENET_STD,  # noqa: F401
                       IMAGENET_WEIGHTS, CaffeNormalization, DownloadProgress, Network, Normalization, conv_count,
                       download_imagenet_weights, features_state, freeze, imagenet_weights_path, is_onnx_file,
                       load_network, load_state_file, load_vgg19_features, make_normalization, random_vgg19_features,
                       random_vgg_features, vgg19_features, vgg_features)
