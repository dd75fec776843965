"""flash-qla 0.1.3: the gated delta rule's forward and backward (autograd) on a Hopper GPU; prints
a digest of the output, the final state and every gradient, to compare a traced run with an
untraced one (``make_oracle.sh``'s extras, ``flash_qla.sh``)."""

import hashlib

import torch
import torch.nn.functional as F
from flash_qla import chunk_gated_delta_rule

torch.manual_seed(0)
B, T, H, K, V = 1, 1024, 4, 128, 128
dtype = torch.bfloat16
q = F.normalize(torch.randn(B, T, H, K, device="cuda", dtype=torch.float32), dim=-1).to(dtype)
k = F.normalize(torch.randn(B, T, H, K, device="cuda", dtype=torch.float32), dim=-1).to(dtype)
v = torch.randn(B, T, H, V, device="cuda", dtype=dtype)
g = F.logsigmoid(torch.randn(B, T, H, device="cuda", dtype=torch.float32))
beta = torch.rand(B, T, H, device="cuda", dtype=torch.float32).sigmoid()
h0 = torch.randn(B, H, K, V, device="cuda", dtype=torch.float32)
for tensor in (q, k, v, g, beta, h0):
    tensor.requires_grad_(True)
o, final_state = chunk_gated_delta_rule(
    q, k, v, g, beta, scale=K**-0.5, initial_state=h0, output_final_state=True
)
(o.float().square().sum() + final_state.float().square().sum()).backward()
torch.cuda.synchronize()
outs = [o, final_state, q.grad, k.grad, v.grad, g.grad, beta.grad, h0.grad]
digest = hashlib.sha256(b"".join(t.detach().float().cpu().numpy().tobytes() for t in outs)).hexdigest()
print("DIGEST", digest, [tuple(t.shape) for t in outs], flush=True)
