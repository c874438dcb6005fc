-- The IoT service's database schema: the one definition of its tables and indexes. The database
-- image applies it (image/database.sh, as the superuser over the local socket, at every start
-- before any network client is admitted); no component runs DDL. Every statement is idempotent
-- (IF NOT EXISTS), so applying it to a database made by an earlier version — whose components
-- created these tables themselves — changes nothing there.

-- The device registry: only a scrypt hash of each device's password (core/passwords.ts).
CREATE TABLE IF NOT EXISTS devices (
  id text PRIMARY KEY,
  password_hash text NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now()
);

-- Telemetry, once per (device id, message id): a message delivered twice is stored once.
CREATE TABLE IF NOT EXISTS telemetry (
  device_id text NOT NULL,
  message_id text NOT NULL,
  received_at timestamptz NOT NULL,
  payload jsonb NOT NULL,
  stored_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (device_id, message_id)
);
-- core's query: a device's telemetry, newest first, paged.
CREATE INDEX IF NOT EXISTS telemetry_newest ON telemetry (device_id, received_at DESC, message_id DESC);
-- processing's retention: the oldest first.
CREATE INDEX IF NOT EXISTS telemetry_received ON telemetry (received_at);

-- What processing could not store as telemetry, with the reason.
CREATE TABLE IF NOT EXISTS dead_letters (
  device_id text NOT NULL,
  message_id text NOT NULL,
  message bytea NOT NULL,
  error text NOT NULL,
  failed_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (device_id, message_id)
);

-- Applications' credentials (core/applications.ts): only a hash of each token.
CREATE TABLE IF NOT EXISTS applications (
  id text PRIMARY KEY,
  token_hash text NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now()
);

-- Each device's connection as the gateways last told it (processing/connection-state.ts): the
-- connection now or last open, whether it is open, and when the device was last heard of.
CREATE TABLE IF NOT EXISTS device_connections (
  device_id text PRIMARY KEY,
  connection_id text NOT NULL,
  connected boolean NOT NULL,
  changed_at timestamptz NOT NULL,
  last_seen timestamptz NOT NULL
);
