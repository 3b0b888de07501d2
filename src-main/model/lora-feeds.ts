/**
 * The LoRA inputs of an engine built with `lora` (docs/design.md §Rollouts): the A/B tensors
 * every score and generate run is fed, from the weights `setLora` was last given (zeros, the
 * base model, until then).
 *
 * Where the device keeps tensors (WebGPU, ./device-kv-cache.ts), each set of weights goes to
 * the GPU once, when it is set, instead of with every run: a decode step of a Qwen3-0.6B
 * adapter (r16, all seven targets) would otherwise send some 40 MB per token. A call takes a
 * lease on the set current when it starts and runs with it to its end; a set replaced by a
 * newer one frees its GPU memory once no call holds it (GPU memory is not the garbage
 * collector's to watch).
 */
import { checkLoraWeights, loraAKey, loraBKey, type LoraSpec } from './lora-inputs.js';
import { ort } from './ort-session.js';

type Feeds = Record<string, ort.Tensor>;

/** Copies host tensors into GPU-resident ones of the same names (./device-kv-cache.ts's `upload`). */
export type Upload = (feeds: Feeds) => Promise<Feeds>;

/** One set of weights: its host tensors, their GPU copies where uploaded, and who holds it. */
class FeedSet {
  leases = 0;
  retired = false;
  readonly device?: Promise<Feeds>;

  constructor(readonly host: Feeds, upload?: Upload) {
    if (upload) {
      this.device = upload(host);
      this.device.catch(() => undefined); // a failed upload fails the runs that await it
    }
  }

  /** Frees the GPU copies once the set is replaced and no call holds it. */
  releaseIfUnused(): void {
    if (!this.retired || this.leases > 0 || !this.device) return;
    void this.device.then((feeds) => {
      for (const t of Object.values(feeds)) if (t.location === 'gpu-buffer') t.dispose();
    }, () => undefined);
  }
}

/** A call's hold on one set of weights: `feeds()` for each run, `release()` when the call ends. */
export interface LoraLease {
  feeds(): Feeds | Promise<Feeds>;
  release(): void;
}

export class LoraFeeds {
  private current: FeedSet;

  constructor(private readonly specs: readonly LoraSpec[], private readonly rank: number, private readonly upload?: Upload) {
    this.current = new FeedSet(this.hostFeeds(null), upload);
  }

  /** Weights for every later call (checked against the specs); null: zeros. The arrays are used as they are, not copied. */
  set(weights: ReadonlyMap<string, Float32Array> | null): void {
    if (weights) checkLoraWeights(this.specs, this.rank, weights);
    const previous = this.current;
    this.current = new FeedSet(this.hostFeeds(weights), this.upload);
    previous.retired = true;
    previous.releaseIfUnused();
  }

  /** The set current now, for one call's runs. */
  lease(): LoraLease {
    const set = this.current;
    set.leases++;
    let released = false;
    return {
      feeds: () => set.device ?? set.host,
      release: () => {
        if (released) return;
        released = true;
        set.leases--;
        set.releaseIfUnused();
      },
    };
  }

  /** Frees the current set's GPU copies (the engine is closing). */
  dispose(): void {
    this.current.retired = true;
    this.current.releaseIfUnused();
  }

  private hostFeeds(weights: ReadonlyMap<string, Float32Array> | null): Feeds {
    const feeds: Feeds = {};
    for (const spec of this.specs) {
      const a = loraAKey(spec), b = loraBKey(spec);
      feeds[a] = new ort.Tensor('float32', weights?.get(a) ?? new Float32Array(this.rank * spec.inFeatures), [this.rank, spec.inFeatures]);
      feeds[b] = new ort.Tensor('float32', weights?.get(b) ?? new Float32Array(spec.outFeatures * this.rank), [spec.outFeatures, this.rank]);
    }
    return feeds;
  }
}
