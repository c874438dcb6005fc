/**
 * The database's one schema (schema.sql) and what the database image makes of it
 * (image/database-roles.sh, image/database.sh), read as text — no PostgreSQL runs in the unit
 * tests: schema.sql creates exactly the tables the store uses, idempotently; database-roles.sh
 * applies it from where the image carries it and gives each component's role rights on those
 * tables alone and no DDL; database.sh admits over the network only those roles, never the
 * superuser — alone, or under Patroni besides the replication role for replication and pg_rewind.
 */

import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';
import { DATABASE_ROLES } from '../src/shared/config.ts';
import { TABLES } from '../src/shared/store.ts';

const schema = readFileSync(new URL('../schema.sql', import.meta.url), 'utf8');
const script = readFileSync(new URL('../image/database-roles.sh', import.meta.url), 'utf8');
const entry = readFileSync(new URL('../image/database.sh', import.meta.url), 'utf8');
const statements = schema
  .replace(/--.*$/gm, '')
  .split(';')
  .map((statement) => statement.trim().replace(/\s+/g, ' '))
  .filter(Boolean);

test('schema.sql creates exactly the tables the store uses, every statement idempotent', () => {
  const created = statements.flatMap((statement) => /^CREATE TABLE IF NOT EXISTS (\w+) /.exec(statement)?.[1] ?? []);
  assert.deepEqual([...created].sort(), [...TABLES].sort());
  for (const statement of statements) assert.match(statement, /^CREATE (TABLE|INDEX) IF NOT EXISTS /, statement);
});

test('database-roles.sh grants each component role rights on the schema\'s tables alone, never DDL; database.sh admits over the network only those roles (and under Patroni the replication role to replicate)', () => {
  const grants = [...script.matchAll(/^GRANT (.+) ON (?!DATABASE|SCHEMA)(.+) TO (.+);$/gm)].map(([, rights, tables, roles]) => ({ rights: rights!, tables: tables!.split(/,\s*/), roles: roles!.split(/,\s*/) }));
  assert.ok(grants.length > 0);
  for (const grant of grants) {
    for (const table of grant.tables) assert.ok((TABLES as readonly string[]).includes(table), `${table} is a table of schema.sql`);
    for (const role of grant.roles) assert.ok(Object.values(DATABASE_ROLES).includes(role as never), `${role} is a component's role`);
    assert.match(grant.rights, /^(SELECT|INSERT|UPDATE|DELETE)(, (SELECT|INSERT|UPDATE|DELETE))*$/, 'row rights only');
  }
  const granted = (role: string) => grants.filter((g) => g.roles.includes(role)).flatMap((g) => g.tables.flatMap((table) => g.rights.split(', ').map((right) => `${right} ${table}`))).sort();
  assert.deepEqual(granted(DATABASE_ROLES.core), ['DELETE applications', 'DELETE devices', 'INSERT applications', 'INSERT devices', 'SELECT applications', 'SELECT device_connections', 'SELECT devices', 'SELECT telemetry', 'UPDATE devices']);
  assert.deepEqual(granted(DATABASE_ROLES.processing), ['DELETE dead_letters', 'DELETE telemetry', 'INSERT dead_letters', 'INSERT device_connections', 'INSERT telemetry', 'SELECT dead_letters', 'SELECT device_connections', 'SELECT telemetry', 'UPDATE device_connections']);
  for (const role of Object.values(DATABASE_ROLES)) {
    assert.match(script, new RegExp(`^ALTER ROLE ${role} WITH LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION NOBYPASSRLS NOINHERIT PASSWORD :'\\w+';$`, 'm'), role);
  }
  assert.match(script, /^REVOKE ALL ON ALL TABLES IN SCHEMA public FROM PUBLIC, iot_core, iot_processing;$/m, 'rights set exactly at every start');
  assert.match(script, /^REVOKE ALL ON SCHEMA public FROM PUBLIC;$/m, 'no CREATE in schema public');
  assert.match(script, /^REVOKE ALL ON DATABASE iot FROM PUBLIC;$/m, 'no temporary tables, no CREATE SCHEMA');

  const hba = /cat >"\$PGDATA\/pg_hba\.conf" <<'HBA'\n([\s\S]*?)\nHBA\n/.exec(entry)?.[1];
  assert.ok(hba, 'database.sh writes pg_hba.conf');
  const rules = hba.split('\n').filter((line) => line.trim() && !line.startsWith('#')).map((line) => line.trim().split(/\s+/));
  assert.deepEqual(rules.filter(([type]) => type === 'local'), [['local', 'all', 'all', 'trust']], 'the local socket for the superuser');
  const components = Object.values(DATABASE_ROLES).map((role) => ['host', 'iot', role, 'scram-sha-256']);
  const network = rules.filter(([type]) => type !== 'local');
  assert.deepEqual(network.map(([type, database, user, , method]) => [type, database, user, method]), components, 'over the network, the components\' roles alone, to database iot, with a password');

  const patroni = /^ {2}pg_hba:\n((?: {4}- .*\n)+)/m.exec(entry)?.[1];
  assert.ok(patroni, 'database.sh gives Patroni its pg_hba');
  const patroniRules = patroni.split('\n').filter(Boolean).map((line) => line.replace(/^ {4}- /, '').split(/\s+/));
  assert.deepEqual(patroniRules.filter(([type]) => type === 'local'), [['local', 'all', 'all', 'trust']]);
  assert.deepEqual(
    patroniRules.filter(([type]) => type !== 'local').map(([type, database, user, , method]) => [type, database, user, method]),
    [['host', 'replication', 'iot_replication', 'scram-sha-256'], ['host', 'postgres', 'iot_replication', 'scram-sha-256'], ...components],
    'under Patroni also the replication role, to replicate and to pg_rewind (database postgres) only',
  );
  assert.match(script, /^ALTER ROLE iot_replication WITH LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE REPLICATION NOBYPASSRLS NOINHERIT PASSWORD :'\w+';$/m);
});
