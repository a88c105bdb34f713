// Stands in for PyTorch's MemoryViz.js in tests (the page torch.cuda._memory_viz.trace_plot()
// writes imports it from a CDN that test machines cannot reach). It exports the same entry,
// add_local_files(files, view), and does what the viewer does first with each file: decode the
// base64, unpickle it, and find the snapshot's segments and device traces. The unpickler takes
// only the opcodes that PyTorch's viewer reads (the plain-data opcodes of protocols 2 to 4 that
// Python's pickle emits), so a pickle the viewer would refuse fails here too.
//
// The outcome goes into the page as <pre id="memscope-stub-result">: "ok" and a summary per
// file, or "error: ..." (also sent to console.error). Our own code, written for these tests.

const OPS = {
  PROTO: 0x80, FRAME: 0x95, STOP: 0x2e, MARK: 0x28,
  EMPTY_DICT: 0x7d, EMPTY_LIST: 0x5d, EMPTY_TUPLE: 0x29,
  SETITEM: 0x73, SETITEMS: 0x75, APPEND: 0x61, APPENDS: 0x65,
  DICT: 0x64, LIST: 0x6c, TUPLE: 0x74, TUPLE1: 0x85, TUPLE2: 0x86, TUPLE3: 0x87,
  NONE: 0x4e, NEWTRUE: 0x88, NEWFALSE: 0x89,
  BININT: 0x4a, BININT1: 0x4b, BININT2: 0x4d, LONG1: 0x8a, BINFLOAT: 0x47,
  SHORT_BINUNICODE: 0x8c, BINUNICODE: 0x58,
  MEMOIZE: 0x94, BINPUT: 0x71, LONG_BINPUT: 0x72, BINGET: 0x68, LONG_BINGET: 0x6a,
};

function fromBase64(text) {
  const raw = atob(text);
  const bytes = new Uint8Array(raw.length);
  for (let i = 0; i < raw.length; i++) bytes[i] = raw.charCodeAt(i);
  return bytes;
}

function unpickle(bytes) {
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const text = new TextDecoder('utf-8', {fatal: true});
  const stack = [];
  const marks = [];
  const memo = [];
  let at = 0;
  const need = n => {
    if (at + n > bytes.length) throw new Error(`truncated at byte ${at}`);
  };
  const u8 = () => (need(1), bytes[at++]);
  const u32 = () => { need(4); const v = view.getUint32(at, true); at += 4; return v; };
  const popMark = () => {
    if (marks.length === 0) throw new Error(`no MARK before byte ${at}`);
    const m = marks.pop();
    return stack.splice(m);
  };
  const str = n => { need(n); const s = text.decode(bytes.subarray(at, at + n)); at += n; return s; };
  for (;;) {
    const start = at;
    const op = u8();
    switch (op) {
      case OPS.PROTO: {
        const p = u8();
        if (p < 2 || p > 4) throw new Error(`pickle protocol ${p}: the viewer reads 2 to 4`);
        break;
      }
      case OPS.FRAME: need(8); at += 8; break;
      case OPS.STOP:
        if (stack.length !== 1) throw new Error(`STOP with ${stack.length} values on the stack`);
        return stack[0];
      case OPS.MARK: marks.push(stack.length); break;
      case OPS.EMPTY_DICT: stack.push({}); break;
      case OPS.EMPTY_LIST: case OPS.EMPTY_TUPLE: stack.push([]); break;
      case OPS.SETITEM: { const v = stack.pop(); const k = stack.pop(); stack.at(-1)[k] = v; break; }
      case OPS.SETITEMS: {
        const items = popMark();
        const d = stack.at(-1);
        for (let i = 0; i < items.length; i += 2) d[items[i]] = items[i + 1];
        break;
      }
      case OPS.APPEND: { const v = stack.pop(); stack.at(-1).push(v); break; }
      case OPS.APPENDS: { const items = popMark(); stack.at(-1).push(...items); break; }
      case OPS.DICT: {
        const items = popMark();
        const d = {};
        for (let i = 0; i < items.length; i += 2) d[items[i]] = items[i + 1];
        stack.push(d);
        break;
      }
      case OPS.LIST: case OPS.TUPLE: stack.push(popMark()); break;
      case OPS.TUPLE1: stack.push(stack.splice(-1)); break;
      case OPS.TUPLE2: stack.push(stack.splice(-2)); break;
      case OPS.TUPLE3: stack.push(stack.splice(-3)); break;
      case OPS.NONE: stack.push(null); break;
      case OPS.NEWTRUE: stack.push(true); break;
      case OPS.NEWFALSE: stack.push(false); break;
      case OPS.BININT: need(4); stack.push(view.getInt32(at, true)); at += 4; break;
      case OPS.BININT1: stack.push(u8()); break;
      case OPS.BININT2: need(2); stack.push(view.getUint16(at, true)); at += 2; break;
      case OPS.LONG1: {
        const n = u8();
        need(n);
        let v = 0n;
        for (let i = n - 1; i >= 0; i--) v = (v << 8n) | BigInt(bytes[at + i]);
        if (n > 0 && bytes[at + n - 1] >= 0x80) v -= 1n << BigInt(8 * n);
        at += n;
        stack.push(n <= 8 ? Number(v) : v);
        break;
      }
      case OPS.BINFLOAT: need(8); stack.push(view.getFloat64(at, false)); at += 8; break;
      case OPS.SHORT_BINUNICODE: stack.push(str(u8())); break;
      case OPS.BINUNICODE: stack.push(str(u32())); break;
      case OPS.MEMOIZE: memo.push(stack.at(-1)); break;
      case OPS.BINPUT: memo[u8()] = stack.at(-1); break;
      case OPS.LONG_BINPUT: memo[u32()] = stack.at(-1); break;
      case OPS.BINGET: case OPS.LONG_BINGET: {
        const i = op === OPS.BINGET ? u8() : u32();
        if (!(i in memo)) throw new Error(`memo ${i} read before it is written (byte ${start})`);
        stack.push(memo[i]);
        break;
      }
      default:
        throw new Error(`opcode 0x${op.toString(16)} at byte ${start}: the viewer cannot read it`);
    }
  }
}

function summarize(snapshot) {
  if (typeof snapshot !== 'object' || !Array.isArray(snapshot.segments)) {
    throw new Error('no segments list');
  }
  if (!Array.isArray(snapshot.device_traces)) throw new Error('no device_traces list');
  let blocks = 0;
  for (const seg of snapshot.segments) {
    if (!Array.isArray(seg.blocks) || typeof seg.total_size !== 'number') {
      throw new Error('a segment without blocks or total_size');
    }
    if (!Array.isArray(snapshot.device_traces[seg.device])) {
      throw new Error(`segment on device ${seg.device} has no device_traces entry`);
    }
    blocks += seg.blocks.length;
  }
  let events = 0;
  for (const trace of snapshot.device_traces) {
    for (const e of trace) {
      if (typeof e.action !== 'string' || typeof e.size !== 'number' || !Array.isArray(e.frames)) {
        throw new Error(`event ${events} lacks action, size or frames`);
      }
      events++;
    }
  }
  return `segments=${snapshot.segments.length} blocks=${blocks} events=${events}`;
}

export function add_local_files(files, view) {
  const out = document.createElement('pre');
  out.id = 'memscope-stub-result';
  try {
    const lines = files.map(f => `${f.name}: ${summarize(unpickle(fromBase64(f.base64)))}`);
    out.textContent = `ok ${view}\n${lines.join('\n')}`;
    console.log(`memscope stub: ${out.textContent}`);
  } catch (e) {
    out.textContent = `error: ${e.message}`;
    console.error(`memscope stub: ${e.message}`);
  }
  document.body.appendChild(out);
}
