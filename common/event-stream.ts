/**
 * Reading a server-sent event stream (the HTML standard's `text/event-stream`) from a fetch body: the
 * portal and the CLI read the controller's live session updates with it (docs/api.md, Live updates). fetch
 * rather than EventSource, because EventSource cannot send the Authorization header.
 */

export interface ServerEvent {
  /** The `event:` field; `message` when the event names none. */
  event: string;
  /** The `data:` lines, joined by line breaks. */
  data: string;
}

/**
 * The events of `body` as they arrive, until it ends. Comment lines (the controller's keep-alives) and the
 * `id:` and `retry:` fields carry nothing a caller here uses and are skipped.
 */
export async function* serverEvents(body: ReadableStream<Uint8Array>): AsyncGenerator<ServerEvent> {
  const decoder = new TextDecoder();
  let pending = '';
  let event = '';
  let data: string[] = [];
  // a reader, not `for await`: the portal's DOM types do not make a stream async-iterable
  const reader = body.getReader();
  for (let read = await reader.read(); !read.done; read = await reader.read()) {
    pending += decoder.decode(read.value, { stream: true });
    const lines = pending.split('\n');
    pending = lines.pop() ?? '';
    for (const raw of lines) {
      const line = raw.endsWith('\r') ? raw.slice(0, -1) : raw;
      if (line === '') {
        if (data.length > 0) yield { event: event || 'message', data: data.join('\n') };
        event = '';
        data = [];
        continue;
      }
      const colon = line.indexOf(':');
      const field = colon === -1 ? line : line.slice(0, colon);
      const value = colon === -1 ? '' : line.slice(colon + 1).replace(/^ /, '');
      if (field === 'event') event = value;
      else if (field === 'data') data.push(value);
    }
  }
}
