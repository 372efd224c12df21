package io.queuemigrate.client;

/**
 * Where one message goes, and under which routing generation that was decided.
 *
 * @param target the side the message is published to
 * @param slice the aggregate key's slice (0 to 2^32-2)
 * @param generation the routing document's generation (0 before any document)
 */
public record Route(Side target, long slice, long generation) {}
