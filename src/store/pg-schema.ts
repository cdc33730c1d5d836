import type pg from 'pg'
import { MEMORY_MIGRATION } from './pg-memory-schema.js'
import { splitSnapshots } from './pg-snapshot-split.js'

/**
 * The PostgreSQL schema, as numbered migrations applied in order (pg-migrate.ts). Append new
 * versions; never edit one that has shipped.
 *
 * Rules every table but `schema_version` keeps:
 * - The primary key leads with `tenant`, so the tables can later be distributed by tenant; a
 *   session's rows (events, idempotency records, projection checkpoint, lease) sit under
 *   `(tenant, session_id)`.
 * - Identifiers are `COLLATE "C"`: lists page by byte order of the session id, as on LMDB.
 * - Documents are `json`, not `jsonb`: jsonb refuses the escaped NUL character (`\u0000`) that
 *   user text may hold, and the log must give back exactly what it was given.
 */
export interface Migration {
  version: number
  description: string
  sql: string
  /** A data step run after `sql`, in the same transaction. */
  after?: (client: pg.ClientBase) => Promise<void>
}

export const MIGRATIONS: readonly Migration[] = [
  {
    version: 1,
    description: 'sessions, events, idempotency records, projection checkpoints, session leases',
    sql: `
CREATE TABLE sessions (
  tenant      text COLLATE "C" NOT NULL,
  session_id  text COLLATE "C" NOT NULL,
  status      text NOT NULL,
  created_at  text NOT NULL,
  updated_at  text NOT NULL,
  model       text NOT NULL,
  metadata    json NOT NULL,
  turn_count  integer NOT NULL,
  last_seq    bigint NOT NULL,
  running     boolean NOT NULL,
  -- the fencing token of the last commit: a commit carrying an older one is refused
  fence       bigint NOT NULL DEFAULT 0,
  record      json NOT NULL,
  PRIMARY KEY (tenant, session_id)
);
CREATE INDEX sessions_by_id ON sessions (session_id);
CREATE INDEX sessions_by_status ON sessions (tenant, status, session_id);
CREATE INDEX sessions_running ON sessions (session_id) WHERE running;

CREATE TABLE events (
  tenant      text COLLATE "C" NOT NULL,
  session_id  text COLLATE "C" NOT NULL,
  seq         bigint NOT NULL,
  turn        integer NOT NULL,
  type        text NOT NULL,
  at          text NOT NULL,
  data        json NOT NULL,
  PRIMARY KEY (tenant, session_id, seq)
);

CREATE TABLE idempotency (
  tenant      text COLLATE "C" NOT NULL,
  session_id  text COLLATE "C" NOT NULL,
  key         text COLLATE "C" NOT NULL,
  created_at  bigint NOT NULL,
  record      json NOT NULL,
  PRIMARY KEY (tenant, session_id, key)
);
CREATE INDEX idempotency_by_age ON idempotency (created_at);

CREATE TABLE projections (
  tenant      text COLLATE "C" NOT NULL,
  session_id  text COLLATE "C" NOT NULL,
  checkpoint  bigint NOT NULL,
  PRIMARY KEY (tenant, session_id)
);

CREATE TABLE leases (
  tenant      text COLLATE "C" NOT NULL,
  session_id  text COLLATE "C" NOT NULL,
  owner       text NOT NULL,
  token       bigint NOT NULL,
  expires_at  timestamptz NOT NULL,
  PRIMARY KEY (tenant, session_id)
);
CREATE INDEX leases_by_expiry ON leases (expires_at);
`,
  },
  MEMORY_MIGRATION,
  {
    version: 3,
    description: 'idempotency claims: the replica running a call with a key, and until when its claim holds',
    sql: `
ALTER TABLE idempotency ADD COLUMN owner text, ADD COLUMN pending_until timestamptz;
`,
  },
  {
    version: 4,
    description: 'the snapshot split: a small head per session, its history with the events (events.m), turn usage in chunks',
    sql: `
ALTER TABLE sessions ADD COLUMN config json, ADD COLUMN notes json, ADD COLUMN head json,
  ADD COLUMN messages_from bigint, ADD COLUMN message_count integer, ADD COLUMN generation integer;
ALTER TABLE events ADD COLUMN m json;
CREATE TABLE session_usage (
  tenant      text COLLATE "C" NOT NULL,
  session_id  text COLLATE "C" NOT NULL,
  chunk       integer NOT NULL,
  usage       json NOT NULL,
  PRIMARY KEY (tenant, session_id, chunk)
);
`,
    // Existing sessions are rewritten to the split layout, then `sessions.record` is dropped.
    after: splitSnapshots,
  },
  {
    version: 5,
    description: 'memory deletions are forgotten after a retention: when each was recorded, and per tenant the last one forgotten',
    // Existing deletions get the migration's time as theirs (a constant default: no table rewrite).
    sql: `
ALTER TABLE memory_deletions ADD COLUMN at timestamptz NOT NULL DEFAULT now();
CREATE INDEX memory_deletions_by_age ON memory_deletions (at);
ALTER TABLE memory_tenants ADD COLUMN pruned bigint NOT NULL DEFAULT 0;
`,
  },
  {
    version: 6,
    description: 'the tenant journal: a row per commit, keyed by its transaction id, so the tenant stream resumes',
    // Commits made before it have no rows: the tenant stream resumes from the first commit after.
    sql: `
CREATE TABLE tenant_log (
  tenant      text COLLATE "C" NOT NULL,
  xid         xid8 NOT NULL,
  session_id  text COLLATE "C" NOT NULL,
  first       bigint NOT NULL,
  last        bigint NOT NULL,
  PRIMARY KEY (tenant, xid)
);
CREATE TABLE tenant_log_pruned (
  tenant      text COLLATE "C" NOT NULL PRIMARY KEY,
  upto        xid8 NOT NULL
);
`,
  },
  {
    version: 7,
    description: 'forks: the session and seq a session was forked from, a column of its own for the session list',
    // Listing reads it without parsing `config`, which may hold text PostgreSQL's json operators refuse (\u0000).
    sql: `
ALTER TABLE sessions ADD COLUMN forked_from json;
`,
  },
  {
    version: 8,
    description:
      "the tenant journal holds several rows per transaction: a batch commits many sessions, each row at its start in the transaction's span",
    // Existing rows, one per transaction, start at 0: their stream ids do not change.
    sql: `
ALTER TABLE tenant_log ADD COLUMN start integer NOT NULL DEFAULT 0;
ALTER TABLE tenant_log DROP CONSTRAINT tenant_log_pkey, ADD PRIMARY KEY (tenant, xid, start);
`,
  },
]

/** The schema version this code writes. */
export const SCHEMA_VERSION = MIGRATIONS[MIGRATIONS.length - 1]!.version
