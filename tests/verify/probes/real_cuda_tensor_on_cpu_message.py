# expect: device-error
# rule: is_device_error knows checkSameGPU's other message (a CPU tensor where a CUDA kernel wants GPU ones), which only real CUDA raises, so verify exits 3 for it
# message: Tensor for argument #2 'mat1' is on CPU, but expected it to be on GPU (while checking arguments for addmm)
raise RuntimeError("Tensor for argument #2 'mat1' is on CPU, but expected it to be on GPU (while checking arguments "
                   "for addmm)")
