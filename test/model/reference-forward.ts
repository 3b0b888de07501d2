/**
 * A plain-JS, float64, one-sequence forward pass of the Llama / Qwen2 / Qwen3 decoder,
 * written straight from the transformers modelling code with no shared code with the ONNX
 * graph builder. Tests compare the graph against it, so a bug the graph shares with the KV
 * cache path (which agreement tests cannot see) still shows.
 */
import type { TinyModel } from '../../tools/tiny-models.js';

type Mat = { shape: number[]; data: Float32Array };

export function referenceLogits(model: TinyModel, ids: number[]): number[][] {
  const c = model.config as Record<string, number & boolean & string>;
  const H = c.hidden_size, nH = c.num_attention_heads, nKV = c.num_key_value_heads, d = c.head_dim;
  const family = c.model_type as string;
  const eps = c.rms_norm_eps, theta = c.rope_theta;
  const w = (name: string): Mat => {
    const t = model.weights.get(name);
    if (!t) throw new Error(`reference: no weight ${name}`);
    return t;
  };
  const linear = (x: number[], name: string, bias?: string): number[] => {
    const W = w(name);
    const [out, inp] = W.shape as [number, number];
    const b = bias && model.weights.has(bias) ? w(bias).data : undefined;
    return Array.from({ length: out }, (_, o) => {
      let s = b ? b[o]! : 0;
      for (let i = 0; i < inp; i++) s += W.data[o * inp + i]! * x[i]!;
      return s;
    });
  };
  const rms = (x: number[], name: string): number[] => {
    const g = w(name).data;
    const ms = x.reduce((a, v) => a + v * v, 0) / x.length;
    const inv = 1 / Math.sqrt(ms + eps);
    return x.map((v, i) => v * inv * g[i]!);
  };
  const rope = (x: number[], pos: number): number[] => {
    const half = d / 2;
    return x.map((v, i) => {
      const j = i % half;
      const angle = pos / theta ** ((2 * j) / d);
      const rotated = i < half ? -x[i + half]! : x[i - half]!;
      return v * Math.cos(angle) + rotated * Math.sin(angle);
    });
  };
  const E = w('model.embed_tokens.weight');
  let hs = ids.map((id) => Array.from(E.data.subarray(id * H, (id + 1) * H)));
  for (let l = 0; l < c.num_hidden_layers; l++) {
    const p = `model.layers.${l}`;
    const keys: number[][][] = [], values: number[][][] = [], queries: number[][][] = [];
    hs.forEach((h, t) => {
      const x = rms(h, `${p}.input_layernorm.weight`);
      const split = (v: number[], n: number) => Array.from({ length: n }, (_, k) => v.slice(k * d, (k + 1) * d));
      let q = split(linear(x, `${p}.self_attn.q_proj.weight`, `${p}.self_attn.q_proj.bias`), nH);
      let k = split(linear(x, `${p}.self_attn.k_proj.weight`, `${p}.self_attn.k_proj.bias`), nKV);
      const v = split(linear(x, `${p}.self_attn.v_proj.weight`, `${p}.self_attn.v_proj.bias`), nKV);
      if (family === 'qwen3') {
        q = q.map((hq) => rms(hq, `${p}.self_attn.q_norm.weight`));
        k = k.map((hk) => rms(hk, `${p}.self_attn.k_norm.weight`));
      }
      queries.push(q.map((hq) => rope(hq, t)));
      keys.push(k.map((hk) => rope(hk, t)));
      values.push(v);
    });
    hs = hs.map((h, t) => {
      const attn: number[] = [];
      for (let head = 0; head < nH; head++) {
        const kv = Math.floor(head / (nH / nKV));
        const scores = Array.from({ length: t + 1 }, (_, s) => queries[t]![head]!.reduce((a, qv, i) => a + qv * keys[s]![kv]![i]!, 0) / Math.sqrt(d));
        const m = Math.max(...scores);
        const e = scores.map((s) => Math.exp(s - m));
        const z = e.reduce((a, b) => a + b, 0);
        for (let i = 0; i < d; i++) attn.push(e.reduce((a, p, s) => a + (p / z) * values[s]![kv]![i]!, 0));
      }
      const o = linear(attn, `${p}.self_attn.o_proj.weight`);
      const h1 = h.map((v, i) => v + o[i]!);
      const y = rms(h1, `${p}.post_attention_layernorm.weight`);
      const gate = linear(y, `${p}.mlp.gate_proj.weight`);
      const up = linear(y, `${p}.mlp.up_proj.weight`);
      const act = gate.map((g, i) => (g / (1 + Math.exp(-g))) * up[i]!);
      const down = linear(act, `${p}.mlp.down_proj.weight`);
      return h1.map((v, i) => v + down[i]!);
    });
  }
  const head = model.weights.has('lm_head.weight') ? 'lm_head.weight' : 'model.embed_tokens.weight';
  return hs.map((h) => linear(rms(h, 'model.norm.weight'), head));
}

/** log_softmax(logits)[target], in float64. */
export function logSoftmaxAt(logits: number[], target: number): number {
  const m = Math.max(...logits);
  const lse = m + Math.log(logits.reduce((a, v) => a + Math.exp(v - m), 0));
  return logits[target]! - lse;
}
