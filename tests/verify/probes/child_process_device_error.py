# expect: device-error
# rule: a device error in a child process (a torchrun-style wrapper) is the run's device error
import subprocess
import sys

code = "import torch\nmodel = torch.nn.Linear(3, 2).cuda()\nmodel(torch.randn(4, 3))\n"
subprocess.run([sys.executable, "-c", code], check=True)
