// Runs SQL in DuckDB (in memory) for iotap's tests: reads a JSON array of statements on
// standard input, runs them in order on one connection, and writes a JSON array with each
// statement's rows (objects; numbers beyond 2^53 as strings, as getRowObjectsJson gives them).
// On an error it writes {"error": message, "statement": index} and exits 1.
import { DuckDBInstance } from '@duckdb/node-api';

const chunks = [];
for await (const c of process.stdin) chunks.push(c);
const statements = JSON.parse(Buffer.concat(chunks).toString('utf8'));
const instance = await DuckDBInstance.create(':memory:', { threads: '2' });
const con = await instance.connect();
const results = [];
for (let i = 0; i < statements.length; i++) {
  try {
    const reader = await con.runAndReadAll(statements[i]);
    results.push(reader.getRowObjectsJson());
  } catch (e) {
    process.stdout.write(JSON.stringify({ error: String(e && e.message || e), statement: i }));
    process.exit(1);
  }
}
process.stdout.write(JSON.stringify(results));
