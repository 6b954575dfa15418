# expect: ok
# rule: a child started with sys.executable (a launcher) sees the GPU too
import subprocess
import sys

code = "import torch; assert torch.cuda.is_available(); print(torch.ones(2, device='cuda').device)"
done = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True)
assert done.stdout.strip() == "cuda:0", done.stdout
