import { createHash } from 'node:crypto';

/** SHA-256 of a text (UTF-8) or bytes, as 64 lower-case hex digits. */
export const sha256 = (data: string | Uint8Array): string => createHash('sha256').update(data).digest('hex');
