# expect: device-error
# rule: is_device_error knows the device messages only real CUDA raises (here checkSameGPU's, from cuDNN), so verify exits 3 for them, not 1
# hint: two different GPUs (cuda:0 and cuda:1)
# message: Expected tensor for argument #1 'input' to have the same device as tensor for argument #2 'weight'; but device 0 does not equal 1 (while checking arguments for cudnn_convolution)
# hint-not: device=
raise RuntimeError("Expected tensor for argument #1 'input' to have the same device as tensor for argument #2 "
                   "'weight'; but device 0 does not equal 1 (while checking arguments for cudnn_convolution)")
