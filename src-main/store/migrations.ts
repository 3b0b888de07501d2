// The database schema as an ordered list of migrations. `schema_version` holds how many
// have run; opening a database runs the missing ones in one transaction. Never edit a
// migration that has shipped: append a new one.
//
// JSON columns hold the structured parts of a turn (tool calls, attachments, citations)
// and judge votes; they are read whole and never queried inside, so JSON text is enough.

export const MIGRATIONS: readonly string[] = [
  // 1: the data model of docs/design.md §Data model
  `
  CREATE TABLE sources (
    id INTEGER PRIMARY KEY,
    path TEXT NOT NULL,
    format TEXT NOT NULL,
    sha256 TEXT NOT NULL UNIQUE,
    imported_at INTEGER NOT NULL,
    sessions INTEGER NOT NULL,
    turns INTEGER NOT NULL,
    warnings TEXT NOT NULL DEFAULT '[]'
  );

  CREATE TABLE sessions (
    id TEXT PRIMARY KEY,
    source_id INTEGER REFERENCES sources(id),
    format TEXT NOT NULL,
    external_id TEXT,
    title TEXT NOT NULL,
    created_at REAL,
    metadata TEXT NOT NULL DEFAULT '{}',
    content_hash TEXT NOT NULL,
    no_sample_reason TEXT,
    updated_at INTEGER NOT NULL
  );
  CREATE INDEX sessions_order ON sessions(created_at, id);

  CREATE TABLE turns (
    session_id TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
    idx INTEGER NOT NULL,
    role TEXT NOT NULL CHECK (role IN ('system','user','assistant','tool')),
    text TEXT NOT NULL,
    reasoning TEXT,
    tool_calls TEXT NOT NULL DEFAULT '[]',
    tool_call_id TEXT,
    tool_name TEXT,
    attachments TEXT NOT NULL DEFAULT '[]',
    citations TEXT NOT NULL DEFAULT '[]',
    timestamp REAL,
    hidden INTEGER NOT NULL DEFAULT 0,
    external_id TEXT,
    classification TEXT NOT NULL CHECK (classification IN ('main','side')),
    side_reason TEXT,
    PRIMARY KEY (session_id, idx)
  );

  CREATE TABLE alternatives (
    session_id TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
    at_turn INTEGER NOT NULL,
    ord INTEGER NOT NULL,
    role TEXT NOT NULL,
    text TEXT NOT NULL,
    reasoning TEXT,
    tool_calls TEXT NOT NULL DEFAULT '[]',
    timestamp REAL,
    external_id TEXT,
    PRIMARY KEY (session_id, at_turn, ord)
  );

  CREATE TABLE samples (
    session_id TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
    response_turn INTEGER NOT NULL,
    feedback_turn INTEGER,
    next_state_role TEXT CHECK (next_state_role IN ('user','tool')),
    context_turns TEXT NOT NULL,
    context_full INTEGER NOT NULL,
    match_hash TEXT NOT NULL,
    PRIMARY KEY (session_id, response_turn)
  );

  CREATE TABLE labels (
    session_id TEXT NOT NULL,
    response_turn INTEGER NOT NULL,
    reward INTEGER CHECK (reward IN (-1, 0, 1)),
    hint TEXT,
    source TEXT NOT NULL,
    votes TEXT NOT NULL DEFAULT '[]',
    repair TEXT,
    notes TEXT,
    updated_at INTEGER NOT NULL,
    judge_backend TEXT,
    judge_model TEXT,
    prompt_version TEXT,
    PRIMARY KEY (session_id, response_turn),
    FOREIGN KEY (session_id, response_turn) REFERENCES samples(session_id, response_turn) ON DELETE CASCADE
  );

  CREATE TABLE settings (
    key TEXT PRIMARY KEY,
    value TEXT NOT NULL
  );
  `,
  // 2: live capture (src-main/capture/). One row per recorded chat-completions exchange,
  // replayed from the capture log (its source of truth) by record id, so replay is
  // idempotent. Main exchanges also shape the session's turns; side ones only live here.
  // A reply the local model served keeps its rollout: the prompt's token ids, the generated
  // token ids (end-of-sequence included when it stopped on one) and their log-probs.
  `
  CREATE TABLE capture_exchanges (
    id TEXT PRIMARY KEY,
    session_id TEXT NOT NULL,
    seq INTEGER NOT NULL,
    kind TEXT NOT NULL CHECK (kind IN ('main','side')),
    at REAL NOT NULL,
    reply_turn INTEGER,
    messages TEXT NOT NULL,
    reply TEXT NOT NULL,
    served_by TEXT NOT NULL CHECK (served_by IN ('local','upstream')),
    model TEXT,
    model_dir TEXT,
    prompt_ids TEXT,
    token_ids TEXT,
    logprobs TEXT
  );
  CREATE INDEX capture_exchanges_session ON capture_exchanges(session_id, seq);
  `,
  // 3: each turn is stored once. A sample no longer copies the indices of its context (n
  // samples × up to n turns made one long conversation quadratic in size and time): it keeps
  // a span over its session's turns (src-shared/context-span.ts), and each turn says whether
  // it may be part of a context. Spans and the new match hashes need the classifier, which
  // the store does not have: the flag below makes the workspace recompute every session's
  // samples, labels kept, when it opens the upgraded database.
  `
  ALTER TABLE turns ADD COLUMN in_context INTEGER NOT NULL DEFAULT 1;
  ALTER TABLE samples ADD COLUMN context_head_end INTEGER NOT NULL DEFAULT 0;
  ALTER TABLE samples ADD COLUMN context_tail_start INTEGER NOT NULL DEFAULT 0;
  ALTER TABLE samples DROP COLUMN context_turns;
  ALTER TABLE samples DROP COLUMN context_full;
  INSERT OR REPLACE INTO settings (key, value) SELECT 'samples_need_rebuild', '1' WHERE EXISTS (SELECT 1 FROM sessions);
  `,
  // 4: a judge's confidence (0–1) and evidence (a JSON list of strings) beside its label
  // (docs/design.md §Judges). Columns rather than part of the votes JSON, so that a review
  // can order labels by confidence; NULL and '[]' for labels judged before.
  `
  ALTER TABLE labels ADD COLUMN confidence REAL;
  ALTER TABLE labels ADD COLUMN evidence TEXT NOT NULL DEFAULT '[]';
  `,
  // 5: review and explicit feedback (docs/design.md §Review, §Composite score, §Feedback
  // endpoint). When a person reviewed a label (manual labels written before count as reviewed
  // then); the composite judge's score with its reasons (JSON, NULL for other labels); and the
  // id of the chat completion a captured reply was sent under, so a client's thumbs-up can
  // name it (NULL for exchanges recorded before).
  `
  ALTER TABLE labels ADD COLUMN reviewed_at INTEGER;
  ALTER TABLE labels ADD COLUMN composite TEXT;
  UPDATE labels SET reviewed_at = updated_at WHERE source = 'manual';
  ALTER TABLE capture_exchanges ADD COLUMN completion_id TEXT;
  CREATE INDEX capture_exchanges_completion ON capture_exchanges(completion_id);
  `,
  // 6: the held-out split (docs/design.md §Evaluation). The rule part of the split is a pure
  // function of the session ids (src-main/pipeline/split-rule.ts); what is stored is the
  // user's choice per session (1: held out, 0: trained on), which wins over the rule, and the
  // percentage, in settings as 'held_out_percent'. No foreign key: a re-import replaces a
  // session's rows but must keep the user's choice; deleting a session removes it.
  `
  CREATE TABLE split_overrides (
    session_id TEXT PRIMARY KEY,
    held_out INTEGER NOT NULL CHECK (held_out IN (0, 1)),
    updated_at INTEGER NOT NULL
  );
  `,
  // 7: the Chat page's saved chats (docs/design.md §Chat page): one row per chat, its turns with
  // both sides' replies, the system prompt and the settings as JSON (read whole, never queried
  // inside). Not sessions: a chat with the base model and an adapter is a comparison, not data
  // to train on (live capture records it as sessions when the user wants that).
  `
  CREATE TABLE chats (
    id TEXT PRIMARY KEY,
    title TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL,
    data TEXT NOT NULL
  );
  CREATE INDEX chats_updated ON chats(updated_at);
  `,
  // 8: a captured exchange's messages are kept as what follows the part it shares with its
  // session's previous main exchange (docs/design.md §Capture log size): a client resends the
  // whole conversation each turn, which made a session's rows quadratic in its length. The
  // row's messages are its base's first `messages_kept`, then its own `messages`. Rows written
  // before have no base and hold all their messages.
  `
  ALTER TABLE capture_exchanges ADD COLUMN messages_base TEXT;
  ALTER TABLE capture_exchanges ADD COLUMN messages_kept INTEGER NOT NULL DEFAULT 0;
  `,
];
