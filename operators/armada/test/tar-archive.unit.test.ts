// Chart archives are extracted safely: nothing lands outside the target, links may not leave the
// tree, sizes are bounded, and a refused archive leaves nothing behind.
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, readFileSync, readlinkSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { gzipSync } from 'node:zlib';
import { after, describe, it } from 'node:test';
import { ArchiveError, extractTarGz, readTarGz } from '../src/chart/tar-archive.ts';

const scratch = mkdtempSync(path.join(os.tmpdir(), 'tar-archive-'));
after(() => rmSync(scratch, { recursive: true, force: true }));

interface Item {
  name: string;
  type?: string;
  body?: string;
  link?: string;
}

/** A ustar archive of `items`, gzipped. */
function tgz(items: Item[]): Buffer {
  const blocks: Buffer[] = [];
  for (const item of items) {
    const body = Buffer.from(item.body ?? '');
    const header = Buffer.alloc(512);
    header.write(item.name, 0, 100);
    header.write('0000644\0', 100);
    header.write('0000000\0', 108);
    header.write('0000000\0', 116);
    header.write(`${body.length.toString(8).padStart(11, '0')}\0`, 124);
    header.write('00000000000\0', 136);
    header.write(item.type ?? '0', 156);
    header.write(item.link ?? '', 157, 100);
    header.write('ustar\0', 257);
    header.write('00', 263);
    header.fill(' ', 148, 156);
    let sum = 0;
    for (const b of header) sum += b;
    header.write(`${sum.toString(8).padStart(6, '0')}\0 `, 148);
    blocks.push(header, body, Buffer.alloc((512 - (body.length % 512)) % 512));
  }
  blocks.push(Buffer.alloc(1024));
  return gzipSync(Buffer.concat(blocks));
}

let n = 0;
const target = () => path.join(scratch, `out-${++n}`);

describe('chart archive extraction', () => {
  it('extracts files, directories and links that stay inside the tree', async () => {
    const dir = target();
    await extractTarGz(tgz([
      { name: 'mychart/', type: '5' },
      { name: 'mychart/Chart.yaml', body: 'name: mychart\n' },
      { name: 'mychart/templates/cm.yaml', body: 'kind: ConfigMap\n' },
      { name: 'mychart/values.yaml', type: '2', link: 'Chart.yaml' },
    ]), dir);
    assert.equal(readFileSync(path.join(dir, 'mychart/Chart.yaml'), 'utf8'), 'name: mychart\n');
    assert.equal(readFileSync(path.join(dir, 'mychart/templates/cm.yaml'), 'utf8'), 'kind: ConfigMap\n');
    assert.equal(readlinkSync(path.join(dir, 'mychart/values.yaml')), 'Chart.yaml');
  });

  const refused: Array<[string, Item[], RegExp]> = [
    ['a name climbing out with ..', [{ name: '../evil.yaml', body: 'x' }], /entry "\.\.\/evil\.yaml" points outside the archive/],
    ['an absolute name', [{ name: '/etc/evil', body: 'x' }], /entry "\/etc\/evil" is an absolute path/],
    ['a symbolic link out of the tree', [{ name: 'chart/escape', type: '2', link: '../../../etc/passwd' }], /symbolic link "chart\/escape" to "[^"]*" points outside the archive/],
    ['a symbolic link with an absolute target', [{ name: 'chart/abs', type: '2', link: '/etc/passwd' }], /absolute/],
    ['a hard link to a file outside', [{ name: 'chart/hard', type: '1', link: '../outside' }], /hard link "chart\/hard" to "\.\.\/outside" points outside the archive/],
    ['a device file', [{ name: 'chart/dev', type: '3' }], /type "3" \(a device, FIFO or unknown kind\): refused/],
  ];
  for (const [what, items, message] of refused) {
    it(`refuses ${what}, leaving nothing behind`, async () => {
      const dir = target();
      await assert.rejects(extractTarGz(tgz(items), dir), (err: unknown) => err instanceof ArchiveError && message.test(err.message));
      assert.equal(existsSync(dir), false);
      assert.equal(existsSync(`${dir}.partial`), false);
    });
  }

  it('bounds the archive and its content', () => {
    const big = tgz([{ name: 'big', body: 'x'.repeat(4096) }]);
    assert.throws(() => readTarGz(big, { maxArchiveBytes: 10, maxContentBytes: 1 << 20 }), /more than the 10 allowed/);
    assert.throws(() => readTarGz(big, { maxArchiveBytes: 1 << 20, maxContentBytes: 1000 }), /content exceeds the 1000 bytes allowed/);
  });

  it('refuses what is not a gzipped tar', () => {
    assert.throws(() => readTarGz(Buffer.from('plain text')), /not a gzipped archive/);
    assert.throws(() => readTarGz(gzipSync(Buffer.from('x'.repeat(600)))), ArchiveError);
    assert.throws(() => readTarGz(gzipSync(Buffer.from('a short text, gzipped\n'))), /holds no entries: not a tar archive/);
  });
});
