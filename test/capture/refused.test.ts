// A request the endpoint refuses leaves nothing behind (issue 35 item 2): a prompt too long for
// the model (400 context_length_exceeded), too many messages (400, bounded before anything is
// looked at) or a bad header is answered with an error and is neither in the capture log nor
// in the database; the next accepted request is captured as usual.
import fs from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MAX_MESSAGES } from '../../src-main/openai/protocol.js';
import { chat, startCapture } from './helpers.js';

let server: Awaited<ReturnType<typeof startCapture>>;
let base: string;

beforeAll(async () => {
  server = await startCapture();
  base = `${server.url}v1`;
});
afterAll(async () => {
  await server?.close();
});

const logText = () => {
  const at = server.capture.status().logPath;
  return at && fs.existsSync(at) ? fs.readFileSync(at, 'utf8') : '';
};
const sessions = () => server.service.currentWorkspace.captureCounts().sessionIds;

describe('a refused request is not captured', () => {
  it('400 context_length_exceeded, too many messages, a bad header: no record, no session', async () => {
    const long = [{ role: 'user', content: 'Once upon a time there was a cat. '.repeat(1200) }];
    for (const stream of [false, true]) {
      const res = await chat(base, server.token, long, { body: { max_tokens: 16, stream }, headers: { 'X-Session-Id': 'too-long' } });
      expect(res.status).toBe(400);
      expect(res.body.error.code).toBe('context_length_exceeded');
    }
    const many = Array.from({ length: MAX_MESSAGES + 1 }, (_, i) => ({ role: i % 2 ? 'assistant' : 'user', content: 'hi' }));
    const tooMany = await chat(base, server.token, many, { headers: { 'X-Session-Id': 'too-many' } });
    expect(tooMany.status).toBe(400);
    expect(tooMany.body.error).toMatchObject({ param: 'messages' });
    expect(tooMany.body.error.message).toMatch(/at most/);
    const badHeader = await chat(base, server.token, [{ role: 'user', content: 'Hi.' }], { headers: { 'X-Turn-Type': 'sideways' } });
    expect(badHeader.status).toBe(400);
    expect(logText()).not.toMatch(/too-long|too-many|"t":"request"/);
    expect(sessions()).toEqual([]);

    const ok = await chat(base, server.token, [{ role: 'user', content: 'Tell me about a cat.' }], { headers: { 'X-Session-Id': 'fits' } });
    expect(ok.status).toBe(200);
    expect(sessions()).toEqual(['capture:fits']);
  });

  it('tool_calls nested thousands deep: 400 naming the field (not a 500 from the capture log), nothing recorded', async () => {
    const deep = '{"a":['.repeat(6000) + '"x"' + ']}'.repeat(6000); // built as text: too deep for JSON.stringify
    const call = `[{"id":"c1","type":"function","function":{"name":"f","arguments":${deep}}}]`;
    const before = logText();
    for (const stream of [false, true]) {
      const body = `{"stream":${stream},"max_tokens":8,"messages":[{"role":"user","content":"Call the tool."},{"role":"assistant","content":"","tool_calls":${call}},{"role":"user","content":"Go on."}]}`;
      const res = await fetch(`${base}/chat/completions`, {
        method: 'POST', headers: { Authorization: `Bearer ${server.token}`, 'Content-Type': 'application/json', 'X-Session-Id': 'deep' }, body,
      });
      expect(res.status).toBe(400);
      const { error } = await res.json();
      expect(error).toMatchObject({ type: 'invalid_request_error', param: 'messages[1].tool_calls' });
      expect(error.message).toMatch(/nested more than \d+ levels/);
    }
    expect(logText()).toBe(before);
    expect(sessions()).not.toContain('capture:deep');
  });
});
