/**
 * @module store/s3-listing
 * The model archives under an S3 prefix: ListObjectsV2 page by page, keeping
 * the keys that are valid targets, each with whether the disk cache holds its
 * current ETag. The caller sends each page's command (with its own retries and
 * deadlines), so this module only knows S3's listing shape.
 */
import { ListObjectsV2Command, type ListObjectsV2CommandOutput } from '@aws-sdk/client-s3';
import type { SourceEntry } from './model-source.js';
import { isArchiveName, normalizeTarget } from './target-path.js';

export interface ListingScope {
  readonly bucket: string;
  readonly prefix: string;
  /** ListObjectsV2 MaxKeys; undefined: the server's (1000 on S3). */
  readonly pageSize: number | undefined;
}

/** Every archive under `scope.prefix`, sorted by target; `send` sends one page's command. */
export async function listObjects(
  scope: ListingScope,
  send: (command: ListObjectsV2Command) => Promise<ListObjectsV2CommandOutput>,
  isCached: (key: string, etag: string | undefined) => boolean,
): Promise<SourceEntry[]> {
  const found: SourceEntry[] = [];
  let token: string | undefined;
  do {
    const page = await send(
      new ListObjectsV2Command({
        Bucket: scope.bucket,
        ...(scope.prefix === '' ? {} : { Prefix: scope.prefix }),
        ...(token === undefined ? {} : { ContinuationToken: token }),
        ...(scope.pageSize === undefined ? {} : { MaxKeys: scope.pageSize }),
      }),
    );
    collect(page, scope.prefix, found, isCached);
    token = page.IsTruncated ? page.NextContinuationToken : undefined;
  } while (token !== undefined && token !== '');
  return found.sort((a, b) => (a.target < b.target ? -1 : a.target > b.target ? 1 : 0));
}

/** An ETag without its quotes (and weak marker); undefined when empty. */
export function unquoteEtag(etag: string | undefined): string | undefined {
  if (etag === undefined) return undefined;
  const trimmed = etag.trim().replace(/^W\//, '');
  const bare = trimmed.startsWith('"') && trimmed.endsWith('"') && trimmed.length >= 2 ? trimmed.slice(1, -1) : trimmed;
  return bare === '' ? undefined : bare;
}

function collect(page: ListObjectsV2CommandOutput, prefix: string, out: SourceEntry[], isCached: (key: string, etag: string | undefined) => boolean): void {
  for (const object of page.Contents ?? []) {
    const key = object.Key;
    if (key === undefined || !key.startsWith(prefix)) continue;
    const rel = key.slice(prefix.length);
    if (!isArchiveName(rel) || !isValidTarget(rel)) continue;
    const cached = isCached(key, unquoteEtag(object.ETag));
    out.push({ target: rel, sizeBytes: object.Size, lastModified: object.LastModified, cached });
  }
}

function isValidTarget(rel: string): boolean {
  try {
    return normalizeTarget(rel) === rel;
  } catch {
    return false;
  }
}
