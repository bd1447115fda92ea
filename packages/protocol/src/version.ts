/** Protocol version carried in every envelope as `v`; bumped on any breaking change. */
export const PROTOCOL_VERSION = 1 as const;
