"""fasterkernels 0.2.0: FlashAttention-2 (causal and not; its PrimFunc is named main) and the GQA
varlen decode; prints a digest of every output, to compare a traced run with an untraced one."""

import hashlib
import torch
from fskernels.tilelang.tilelang_fa2 import flash_attn_mha_bhsd
from fskernels.tilelang.tilelang_gqa_decode import flash_decode_gqa_varlen

torch.manual_seed(0)
q, k, v = (torch.randn(2, 8, 512, 64, device="cuda", dtype=torch.bfloat16) for _ in range(3))
outs = [flash_attn_mha_bhsd(q, k, v, False), flash_attn_mha_bhsd(q, k, v, True)]
lens = torch.tensor([100, 300, 512, 1000])
cu = torch.cat([torch.zeros(1, dtype=torch.int64), lens.cumsum(0)]).to(torch.int32).cuda()
total = int(lens.sum())
qd = torch.randn(4, 32, 128, device="cuda", dtype=torch.float16)
kd = torch.randn(total, 8, 128, device="cuda", dtype=torch.float16)
vd = torch.randn(total, 8, 128, device="cuda", dtype=torch.float16)
outs.append(flash_decode_gqa_varlen(qd, kd, vd, cu))
torch.cuda.synchronize()
digest = hashlib.sha256(b"".join(o.float().cpu().numpy().tobytes() for o in outs)).hexdigest()
print("DIGEST", digest, [tuple(o.shape) for o in outs], flush=True)
