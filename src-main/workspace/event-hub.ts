// The back end's event hub: the service emits, each transport (IPC to the window, SSE to
// browsers) subscribes and forwards. Typed by the contract's ApiEvents.
import type { ApiEvents, EventName } from '../../src-shared/contract.js';

export type AnyEventListener = <E extends EventName>(name: E, payload: ApiEvents[E]) => void;

export class EventHub {
  private readonly listeners = new Set<AnyEventListener>();

  subscribe(listener: AnyEventListener): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  emit<E extends EventName>(name: E, payload: ApiEvents[E]): void {
    for (const listener of this.listeners) {
      try {
        listener(name, payload);
      } catch (err) {
        // A broken subscriber (a closed socket, a destroyed window) must not stop the others.
        process.stderr.write(`hindsight: event listener failed for ${name}: ${(err as Error).message}\n`);
      }
    }
  }
}
