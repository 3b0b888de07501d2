// The two IPC channels between main and the preload: calls go one way, events the other.
export const CALL_CHANNEL = 'hindsight:call';
export const EVENT_CHANNEL = 'hindsight:event';
