#!/usr/bin/env python3
"""Export a Hugging Face GPT-2 folder to the ONNX layout transformers.js loads, offline.

    python tools/peer/export_onnx.py --model /root/ckpt/gpt2-124m --out /root/ckpt/gpt2-124m-onnx

Run it with the peer venv's python (tools/peer/setup.sh makes it: optimum-onnx 0.1.0, transformers<4.58,
onnx, onnxruntime). Input: config.json, model.safetensors, tokenizer.json (f16 checkpoints are exported
in f32). Output, for `env.localModelPath` + model id in transformers.js:

    OUT/config.json, generation_config.json, tokenizer.json, tokenizer_config.json
    OUT/onnx/model.onnx            fp32, with KV cache (task text-generation-with-past): dtype 'fp32'
    OUT/onnx/model_quantized.onnx  8-bit weights: dtype 'q8' (transformers.js' suffix "_quantized")

The q8 file mirrors transformers.js' scripts/quantize.py mode q8: onnxruntime's dynamic quantizer
(IntegerOps, QInt8 weights since GPT-2 has no Conv, QUInt8 activations, per-tensor, no reduce_range,
EnableSubgraph + MatMulConstBOnly). One difference: optimum exports GPT-2's Conv1D layers as `Gemm`,
which the IntegerOps quantizer leaves in f32, so every Gemm is first rewritten as MatMul (+ Add).

Checks printed: fp32 ONNX vs PyTorch logits (prompt and one cached decode step), q8 vs PyTorch, the
fraction of initializer bytes that are 8-bit in the q8 file, and the file sizes.
"""
import argparse
import json
import os
import shutil
import sys
import tempfile

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")

import numpy as np  # noqa: E402
import onnx  # noqa: E402
from onnx import helper, numpy_helper  # noqa: E402


def log(*a):
    print(*a, flush=True)


# --------------------------------------------------------------------------------------------
# Export
# --------------------------------------------------------------------------------------------
def export_fp32(model_dir, work_dir):
    import torch
    from transformers import GPT2LMHeadModel
    from optimum.exporters.onnx import onnx_export_from_model

    model = GPT2LMHeadModel.from_pretrained(model_dir, torch_dtype=torch.float32).eval()
    onnx_export_from_model(
        model,
        output=work_dir,
        task="text-generation-with-past",
        do_validation=False,  # validated below against PyTorch
        device="cpu",
    )
    return model


def gemm_to_matmul(model):
    """Rewrite every Gemm (A·op(B)·alpha + beta·C) as MatMul(A, B') [+ Add(., C')], in place."""
    graph = model.graph
    inits = {t.name: t for t in graph.initializer}
    uses = {}
    for n in graph.node:
        for i in n.input:
            uses[i] = uses.get(i, 0) + 1
    new_nodes, count = [], 0
    for node in graph.node:
        if node.op_type != "Gemm":
            new_nodes.append(node)
            continue
        attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
        alpha, beta = float(attrs.get("alpha", 1.0)), float(attrs.get("beta", 1.0))
        trans_a, trans_b = int(attrs.get("transA", 0)), int(attrs.get("transB", 0))
        a, b = node.input[0], node.input[1]
        c = node.input[2] if len(node.input) > 2 and node.input[2] else None
        base = node.name or node.output[0]
        if trans_a:
            t = base + "/A_T"
            new_nodes.append(helper.make_node("Transpose", [a], [t], name=t, perm=[1, 0]))
            a = t
        if b in inits and (trans_b or alpha != 1.0):
            w = numpy_helper.to_array(inits[b])
            if trans_b:
                w = np.ascontiguousarray(w.T)
            if alpha != 1.0:
                w = (w * alpha).astype(w.dtype)
            name = b + "_mm" if uses.get(b, 0) > 1 else b
            t = numpy_helper.from_array(w, name)
            if name == b:
                inits[b].CopyFrom(t)
            else:
                graph.initializer.append(t)
                inits[name] = graph.initializer[-1]
            b = name
        elif trans_b or alpha != 1.0:
            if trans_b:
                t = base + "/B_T"
                new_nodes.append(helper.make_node("Transpose", [b], [t], name=t, perm=[1, 0]))
                b = t
            if alpha != 1.0:
                s = base + "/alpha"
                graph.initializer.append(numpy_helper.from_array(np.array(alpha, np.float32), s))
                t = base + "/B_scaled"
                new_nodes.append(helper.make_node("Mul", [b, s], [t], name=t))
                b = t
        mm_out = node.output[0] if c is None or beta == 0.0 else base + "/MatMul_output_0"
        new_nodes.append(helper.make_node("MatMul", [a, b], [mm_out], name=base + "/MatMul"))
        if c is not None and beta != 0.0:
            if beta != 1.0:
                if c in inits:
                    cv = numpy_helper.to_array(inits[c]) * beta
                    name = c + "_beta"
                    graph.initializer.append(numpy_helper.from_array(cv.astype(np.float32), name))
                    c = name
                else:
                    s = base + "/beta"
                    graph.initializer.append(numpy_helper.from_array(np.array(beta, np.float32), s))
                    t = base + "/C_scaled"
                    new_nodes.append(helper.make_node("Mul", [c, s], [t], name=t))
                    c = t
            new_nodes.append(helper.make_node("Add", [mm_out, c], [node.output[0]], name=base + "/Add"))
        count += 1
    del graph.node[:]
    graph.node.extend(new_nodes)
    # Drop initializers nothing uses any more (e.g. an original weight we copied as transposed).
    used = {i for n in graph.node for i in n.input} | {o.name for o in graph.output}
    keep = [t for t in graph.initializer if t.name in used]
    del graph.initializer[:]
    graph.initializer.extend(keep)
    return count


def quantize_q8(fp32_path, out_path):
    """transformers.js scripts/quantize.py, mode q8, after the Gemm → MatMul rewrite."""
    from onnxruntime.quantization import QuantizationMode, QuantType
    from onnxruntime.quantization.onnx_quantizer import ONNXQuantizer
    from onnxruntime.quantization.registry import IntegerOpsRegistry

    model = onnx.load(fp32_path)
    n = gemm_to_matmul(model)
    ops = {node.op_type for node in model.graph.node}
    quint8_ops = ("Conv", "GroupQueryAttention", "MultiHeadAttention")
    weight_type = QuantType.QUInt8 if any(o in ops for o in quint8_ops) else QuantType.QInt8
    log(f"q8: rewrote {n} Gemm nodes as MatMul+Add; weight type {weight_type.name}")
    quantizer = ONNXQuantizer(
        model,
        False,  # per_channel (quantize.py default None)
        False,  # reduce_range
        mode=QuantizationMode.IntegerOps,
        static=False,
        weight_qType=weight_type,
        activation_qType=QuantType.QUInt8,
        tensors_range=None,
        nodes_to_quantize=[],
        nodes_to_exclude=[],
        op_types_to_quantize=set(IntegerOpsRegistry.keys()),
        extra_options=dict(EnableSubgraph=True, MatMulConstBOnly=True),
    )
    quantizer.quantize_model()
    q = quantizer.model.model
    onnx.checker.check_model(q)
    onnx.save(q, out_path)
    return q


def init_bytes(model):
    by_type = {}
    for t in model.graph.initializer:
        nbytes = len(t.raw_data) if t.raw_data else numpy_helper.to_array(t).nbytes
        k = onnx.helper.tensor_dtype_to_np_dtype(t.data_type).name
        by_type[k] = by_type.get(k, 0) + nbytes
    return by_type


# --------------------------------------------------------------------------------------------
# Checks
# --------------------------------------------------------------------------------------------
def ort_feeds(sess, ids, past, past_len, n_head, head_dim):
    feeds = {}
    total = past_len + ids.shape[1]
    for i in sess.get_inputs():
        if i.name == "input_ids":
            feeds[i.name] = ids
        elif i.name == "attention_mask":
            feeds[i.name] = np.ones((1, total), np.int64)
        elif i.name == "position_ids":
            feeds[i.name] = np.arange(past_len, total, dtype=np.int64)[None]
        elif i.name.startswith("past_key_values."):
            feeds[i.name] = past[i.name] if past else np.zeros((1, n_head, 0, head_dim), np.float32)
        else:
            raise RuntimeError(f"unexpected ONNX input {i.name}")
    return feeds


def check(path, model, tok, label, tol):
    import onnxruntime as ort
    import torch

    cfg = model.config
    n_head, head_dim = cfg.n_head, cfg.n_embd // cfg.n_head
    text = "The quick brown fox jumps over the lazy dog because it"
    ids = np.array([tok.encode(text).ids], np.int64)
    with torch.no_grad():
        ref = model(torch.from_numpy(ids)).logits.numpy()[0]
    sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    out_names = [o.name for o in sess.get_outputs()]
    # Prompt minus its last token, then the last token as a cached decode step.
    outs = sess.run(None, ort_feeds(sess, ids[:, :-1], None, 0, n_head, head_dim))
    res = dict(zip(out_names, outs))
    past = {k.replace("present.", "past_key_values."): v for k, v in res.items() if k.startswith("present.")}
    step = dict(zip(out_names, sess.run(None, ort_feeds(sess, ids[:, -1:], past, ids.shape[1] - 1, n_head, head_dim))))
    got = np.concatenate([res["logits"][0], step["logits"][0]], 0)
    diff = float(np.abs(got - ref).max())
    scale = float(np.abs(ref).max())
    argmax = float((got.argmax(-1) == ref.argmax(-1)).mean())
    log(f"{label}: {ids.shape[1]}-token prompt (last token via KV cache): max |logits - PyTorch| = {diff:.3g} "
        f"(max |logit| {scale:.3g}), argmax agreement {argmax:.0%}")
    if tol is not None and not diff <= tol:
        sys.exit(f"{label}: logits differ from PyTorch by {diff} > {tol}")
    return diff


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", required=True, help="Hugging Face GPT-2 folder")
    ap.add_argument("--out", required=True, help="output folder (replaced files: config, tokenizer, onnx/)")
    ap.add_argument("--no-q8", action="store_true", help="skip model_quantized.onnx")
    args = ap.parse_args()

    from tokenizers import Tokenizer

    os.makedirs(os.path.join(args.out, "onnx"), exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="gpt2-onnx-") as work:
        model = export_fp32(args.model, work)
        fp32 = onnx.load(os.path.join(work, "model.onnx"))  # pulls in external data, if any
        ops = sorted({n.op_type for n in fp32.graph.node})
        log(f"fp32 graph: inputs {[i.name for i in fp32.graph.input][:4]}..., ops {ops}")
        fp32_path = os.path.join(args.out, "onnx", "model.onnx")
        for stale in (fp32_path + "_data", fp32_path + ".data"):
            if os.path.exists(stale):
                os.remove(stale)
        onnx.save(fp32, fp32_path)
        del fp32

    # Model/tokenizer configs for transformers.js.
    cfg = model.config.to_dict()
    cfg.pop("torch_dtype", None)
    cfg.pop("dtype", None)
    cfg["use_cache"] = True
    with open(os.path.join(args.out, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2)
    shutil.copyfile(os.path.join(args.model, "tokenizer.json"), os.path.join(args.out, "tokenizer.json"))
    tok = Tokenizer.from_file(os.path.join(args.model, "tokenizer.json"))
    eos = tok.id_to_token(model.config.eos_token_id) or "<|endoftext|>"
    bos = tok.id_to_token(model.config.bos_token_id) or eos
    src_tc = os.path.join(args.model, "tokenizer_config.json")
    if os.path.exists(src_tc):
        shutil.copyfile(src_tc, os.path.join(args.out, "tokenizer_config.json"))
    else:
        with open(os.path.join(args.out, "tokenizer_config.json"), "w") as f:
            json.dump({
                "tokenizer_class": "GPT2Tokenizer", "add_prefix_space": False, "add_bos_token": False,
                "bos_token": bos, "eos_token": eos, "unk_token": eos,
                "model_max_length": model.config.n_positions, "clean_up_tokenization_spaces": False,
            }, f, indent=2)
    gen = {"bos_token_id": model.config.bos_token_id, "eos_token_id": model.config.eos_token_id}
    src_gc = os.path.join(args.model, "generation_config.json")
    if os.path.exists(src_gc):
        with open(src_gc) as f:
            gen = json.load(f)
    with open(os.path.join(args.out, "generation_config.json"), "w") as f:
        json.dump(gen, f, indent=2)

    check(fp32_path, model, tok, "fp32 ONNX", tol=1e-2)

    if not args.no_q8:
        q8_path = os.path.join(args.out, "onnx", "model_quantized.onnx")
        q = quantize_q8(fp32_path, q8_path)
        by_type = init_bytes(q)
        total = sum(by_type.values())
        q8b = by_type.get("int8", 0) + by_type.get("uint8", 0)
        q_inits = {t.name for t in q.graph.initializer}
        left = [n.name for n in q.graph.node if n.op_type in ("Gemm", "MatMul") and any(i in q_inits for i in n.input)]
        log(f"q8 initializers: {', '.join(f'{k} {v / 2**20:.1f} MiB' for k, v in sorted(by_type.items()))}; "
            f"8-bit fraction {q8b / total:.4f}; float Gemm/MatMul with constant weights left: {left or 'none'}")
        if q8b / total < 0.9:
            sys.exit(f"q8: only {q8b / total:.1%} of the weight bytes are 8-bit")
        del q
        check(q8_path, model, tok, "q8 ONNX", tol=None)

    for root, _, files in os.walk(args.out):
        for name in sorted(files):
            p = os.path.join(root, name)
            log(f"{os.path.getsize(p) / 2**20:10.1f} MiB  {p}")


if __name__ == "__main__":
    main()
