/**
 * Safe extraction of a chart archive (.tgz, as `helm package` writes it, or any gzipped tar).
 *
 * Guarantees:
 * - Every entry lands inside the target directory: an absolute name, a `..` that climbs out, or a
 *   symbolic or hard link whose target resolves outside the tree fails the whole extraction with
 *   an `ArchiveError` naming the entry; so do device files and FIFOs.
 * - The archive (compressed) and its content (the sum of its files) are bounded: beyond
 *   `maxArchiveBytes` / `maxContentBytes` it fails rather than fill the disk.
 * - Extraction is all or nothing: it happens in a sibling directory renamed into place at the end;
 *   a failure leaves nothing behind.
 * - Reads ustar, GNU long names (`L`, `K`) and pax extended headers (`x`: path, linkpath, size).
 */
import { gunzipSync } from 'node:zlib';
import { mkdir, rename, rm, symlink, writeFile, copyFile } from 'node:fs/promises';
import path from 'node:path';

export class ArchiveError extends Error {
  override name = 'ArchiveError';
}

export interface ExtractLimits {
  maxArchiveBytes: number;
  maxContentBytes: number;
}

export const defaultExtractLimits: ExtractLimits = { maxArchiveBytes: 20 * 1024 * 1024, maxContentBytes: 100 * 1024 * 1024 };

interface Entry {
  name: string;
  type: string;
  linkName: string;
  data: Buffer;
}

/** The entries of a gzipped tar archive, checked against the limits (no file is written). */
export function readTarGz(archive: Buffer, limits: ExtractLimits = defaultExtractLimits): Entry[] {
  if (archive.length > limits.maxArchiveBytes) throw new ArchiveError(`the archive is ${archive.length} bytes, more than the ${limits.maxArchiveBytes} allowed`);
  let tar: Buffer;
  try {
    tar = gunzipSync(archive, { maxOutputLength: limits.maxContentBytes + 64 * 1024 * 1024 });
  } catch (err) {
    throw new ArchiveError(`not a gzipped archive, or larger than allowed: ${err instanceof Error ? err.message : String(err)}`);
  }
  const entries: Entry[] = [];
  let total = 0;
  let longName: string | undefined;
  let longLink: string | undefined;
  let pax: Record<string, string> = {};
  for (let offset = 0; offset + 512 <= tar.length; ) {
    const header = tar.subarray(offset, offset + 512);
    if (header.every((b) => b === 0)) break;
    const field = (start: number, length: number) => header.subarray(start, start + length).toString('utf8').replace(/\0.*$/s, '');
    const size = pax['size'] !== undefined ? Number(pax['size']) : parseInt(field(124, 12).trim() || '0', 8);
    if (!Number.isFinite(size) || size < 0) throw new ArchiveError(`entry at byte ${offset} has an invalid size`);
    const type = field(156, 1) || '0';
    const data = tar.subarray(offset + 512, offset + 512 + size);
    offset += 512 + Math.ceil(size / 512) * 512;
    if (type === 'L') { longName = data.toString('utf8').replace(/\0.*$/s, ''); continue; }
    if (type === 'K') { longLink = data.toString('utf8').replace(/\0.*$/s, ''); continue; }
    if (type === 'x') { pax = parsePax(data); continue; }
    if (type === 'g') continue;
    const prefix = field(345, 155);
    const name = pax['path'] ?? longName ?? (prefix ? `${prefix}/${field(0, 100)}` : field(0, 100));
    const linkName = pax['linkpath'] ?? longLink ?? field(157, 100);
    longName = longLink = undefined;
    pax = {};
    if (type === '0' || type === '7') {
      total += size;
      if (total > limits.maxContentBytes) throw new ArchiveError(`the archive's content exceeds the ${limits.maxContentBytes} bytes allowed`);
    }
    entries.push({ name, type, linkName, data });
  }
  if (entries.length === 0) throw new ArchiveError('it holds no entries: not a tar archive');
  return entries;
}

function parsePax(data: Buffer): Record<string, string> {
  const records: Record<string, string> = {};
  const text = data.toString('utf8');
  for (let at = 0; at < text.length; ) {
    const space = text.indexOf(' ', at);
    const length = Number(text.slice(at, space));
    if (space < 0 || !Number.isInteger(length) || length <= 0) break;
    const record = text.slice(space + 1, at + length - 1);
    const eq = record.indexOf('=');
    if (eq > 0) records[record.slice(0, eq)] = record.slice(eq + 1);
    at += length;
  }
  return records;
}

/** Where an entry (or a link's target) lands, or an error when that is outside `root`. */
function inside(root: string, name: string, what: string): string {
  if (path.isAbsolute(name)) throw new ArchiveError(`${what} ${JSON.stringify(name)} is an absolute path`);
  const target = path.resolve(root, name);
  if (target !== root && !target.startsWith(root + path.sep)) throw new ArchiveError(`${what} ${JSON.stringify(name)} points outside the archive`);
  return target;
}

/** Extracts a gzipped tar archive into `dir` (which must not exist yet), all or nothing. */
export async function extractTarGz(archive: Buffer, dir: string, limits: ExtractLimits = defaultExtractLimits): Promise<void> {
  const entries = readTarGz(archive, limits);
  const partial = `${dir}.partial`;
  await rm(partial, { recursive: true, force: true });
  await mkdir(partial, { recursive: true });
  const root = path.resolve(partial);
  try {
    const links: Entry[] = [];
    for (const entry of entries) {
      const target = inside(root, entry.name, 'entry');
      switch (entry.type) {
        case '0':
        case '7':
          await mkdir(path.dirname(target), { recursive: true });
          await writeFile(target, entry.data, { mode: 0o644 });
          break;
        case '5':
          await mkdir(target, { recursive: true });
          break;
        case '1':
        case '2':
          links.push(entry);
          break;
        default:
          throw new ArchiveError(`entry ${JSON.stringify(entry.name)} is of type ${JSON.stringify(entry.type)} (a device, FIFO or unknown kind): refused`);
      }
    }
    for (const link of links) {
      const target = inside(root, link.name, 'link');
      await mkdir(path.dirname(target), { recursive: true });
      if (link.type === '1') {
        await copyFile(inside(root, link.linkName, `hard link ${JSON.stringify(link.name)} to`), target);
      } else {
        inside(root, path.join(path.dirname(link.name), link.linkName), `symbolic link ${JSON.stringify(link.name)} to`);
        if (path.isAbsolute(link.linkName)) throw new ArchiveError(`symbolic link ${JSON.stringify(link.name)} has an absolute target`);
        await symlink(link.linkName, target);
      }
    }
    await rename(partial, dir);
  } catch (err) {
    await rm(partial, { recursive: true, force: true });
    throw err;
  }
}
