// The memscope report page's script (page.html): reads the report's data (JSON written by
// html_report.cpp), draws memory over time with Chart.js and the segment map on a canvas, makes
// the tables sortable, and finally records what it drew in #memscope-report-state, so a test
// can check the page as a person would see it rather than the data it was given.
(() => {
  'use strict';
  const data = JSON.parse(document.getElementById('memscope-report-data').textContent);
  const state = {
    rendered: false,
    series: [],
    peak: null,
    bands: [],
    segments: 0,
    segment_rows: 0,
    blocks: 0,
    y_title: null,
    tables: document.querySelectorAll('table.data').length,
  };
  // Chart and map publish independently; the state is rewritten whenever either finishes.
  let chartDone = !(data.series && data.series.length);
  let mapDone = !data.segment_map;
  function publish() {
    state.rendered = chartDone && mapDone;
    document.getElementById('memscope-report-state').textContent = JSON.stringify(state);
  }

  // ---- Formatting ----------------------------------------------------------------------
  const UNITS = ['B', 'KiB', 'MiB', 'GiB', 'TiB', 'PiB'];
  function fmtBytes(v) {
    if (!Number.isFinite(v)) return String(v);
    let a = Math.abs(v);
    let i = 0;
    while (a >= 1024 && i < UNITS.length - 1) { a /= 1024; i++; }
    const digits = i === 0 ? 0 : a >= 100 ? 1 : 2;
    return (v < 0 ? '-' : '') + a.toFixed(digits) + ' ' + UNITS[i];
  }
  // Axis ticks: as few digits as the value needs ("512 MiB", "1.5 GiB").
  function fmtTick(v) {
    let a = Math.abs(v);
    let i = 0;
    while (a >= 1024 && i < UNITS.length - 1) { a /= 1024; i++; }
    return (v < 0 ? '-' : '') + String(Number(a.toFixed(2))) + ' ' + UNITS[i];
  }
  function fmtTime(t, span) {
    const digits = span >= 100 ? 0 : span >= 10 ? 1 : span >= 1 ? 2 : 3;
    return t.toFixed(digits) + ' s';
  }
  // A tick step of 1, 2 or 5 times a power of ten, in the unit of the largest value, so the
  // axis reads "0, 256 MiB, 512 MiB" rather than "0, 268435456".
  function niceStep(max, ticks) {
    let unit = 1;
    while (max / unit >= 1024 && unit < 2 ** 50) unit *= 1024;
    const raw = max / unit / ticks;
    const p = 10 ** Math.floor(Math.log10(raw));
    const step = [1, 2, 2.5, 5, 10].map((m) => m * p).find((s) => s >= raw);
    return Math.max(step * unit, 1);
  }

  // Okabe-Ito: distinguishable with the common colour vision deficiencies.
  const COLOURS = ['#0072B2', '#E69F00', '#009E73', '#CC79A7', '#56B4E9', '#D55E00', '#8C6D1F',
    '#000000'];
  const BAND_FILL = ['rgba(0, 114, 178, 0.08)', 'rgba(0, 158, 115, 0.09)',
    'rgba(204, 121, 167, 0.10)', 'rgba(230, 159, 0, 0.10)'];
  const BAND_EDGE = ['rgba(0, 114, 178, 0.45)', 'rgba(0, 158, 115, 0.5)',
    'rgba(204, 121, 167, 0.55)', 'rgba(230, 159, 0, 0.6)'];

  // ---- Memory over time ----------------------------------------------------------------
  function drawChart() {
    const canvas = document.getElementById('memscope-chart');
    const bands = data.bands || [];
    const peak = data.peak || null;
    let xmin = Infinity;
    let xmax = -Infinity;
    let ymax = 0;
    for (const s of data.series) {
      if (s.t.length) { xmin = Math.min(xmin, s.t[0]); xmax = Math.max(xmax, s.t[s.t.length - 1]); }
      for (const y of s.y) if (y > ymax) ymax = y;
    }
    for (const b of bands) {
      xmin = Math.min(xmin, b.begin);
      xmax = Math.max(xmax, b.end >= b.begin ? b.end : b.begin);
    }
    if (peak) ymax = Math.max(ymax, peak.bytes);
    if (!Number.isFinite(xmin)) { xmin = 0; xmax = 1; }
    if (xmax <= xmin) xmax = xmin + 1;
    const span = xmax - xmin;
    const yStep = niceStep(ymax > 0 ? ymax * 1.08 : 1024, 6);
    const yMax = Math.max(yStep, Math.ceil((ymax * 1.08) / yStep) * yStep);

    const datasets = data.series.map((s, i) => {
      const colour = COLOURS[i % COLOURS.length];
      const points = new Array(s.t.length);
      for (let j = 0; j < s.t.length; j++) points[j] = { x: s.t[j], y: s.y[j] };
      return {
        label: s.name,
        data: points,
        memscope: s,
        borderColor: colour,
        backgroundColor: colour,
        borderWidth: i === 0 || s.dashed ? 2 : 1.5,
        // Lines past the eighth reuse a colour, dashed so they still differ; a line that runs
        // on top of another (live under allocated) is dashed and drawn over the rest.
        borderDash: s.dashed ? [7, 4] : i >= COLOURS.length ? [6, 3] : [],
        order: s.dashed ? -1 : 0,
        pointRadius: 0,
        pointHoverRadius: 3,
        pointHitRadius: 4,
        stepped: s.step ? 'before' : false,
        tension: 0,
        fill: false,
      };
    });
    if (peak) {
      datasets.push({
        label: 'peak',
        memscopePeak: peak,
        data: [{ x: peak.t, y: peak.bytes }],
        showLine: false,
        pointStyle: 'triangle',
        rotation: 180,
        pointRadius: 8,
        pointHoverRadius: 10,
        pointBackgroundColor: '#D55E00',
        pointBorderColor: '#ffffff',
        pointBorderWidth: 1.5,
        borderColor: '#D55E00',
        backgroundColor: '#D55E00',
        order: -2,
      });
    }

    // Hover: every visible line's value at the pointer's time (the last point at or before
    // it for a step line, the nearest otherwise), so lines sampled at different times are
    // all listed; a line is left out where it does not exist (a process not yet started or
    // already gone). Chart.js's 'index' mode would pair points by position instead.
    Chart.Interaction.modes.memscopeTime = (chart, e) => {
      const pos = Chart.helpers.getRelativePosition(e, chart);
      const area = chart.chartArea;
      if (pos.x < area.left || pos.x > area.right) return [];
      const x = chart.scales.x.getValueForPixel(pos.x);
      const items = [];
      chart.data.datasets.forEach((ds, di) => {
        if (!chart.isDatasetVisible(di) || !ds.data.length) return;
        const meta = chart.getDatasetMeta(di);
        const pts = ds.data;
        if (ds.memscopePeak) {
          const el = meta.data[0];
          if (el && Math.abs(el.x - pos.x) <= 10 && Math.abs(el.y - pos.y) <= 40) {
            items.push({ element: el, datasetIndex: di, index: 0 });
          }
          return;
        }
        if (x < pts[0].x || x > pts[pts.length - 1].x) return;
        let lo = 0;
        let hi = pts.length - 1;
        while (lo < hi) {  // the last point with x <= pointer
          const mid = (lo + hi + 1) >> 1;
          if (pts[mid].x <= x) lo = mid; else hi = mid - 1;
        }
        let idx = lo;
        if (!ds.stepped && idx + 1 < pts.length && pts[idx + 1].x - x < x - pts[idx].x) idx++;
        if (meta.data[idx]) items.push({ element: meta.data[idx], datasetIndex: di, index: idx });
      });
      return items;
    };

    const bandPlugin = {
      id: 'memscopeBands',
      beforeDatasetsDraw(chart) {
        const { ctx, chartArea: a, scales: { x: xs } } = chart;
        const drawn = [];
        ctx.save();
        ctx.beginPath();
        ctx.rect(a.left, a.top, a.right - a.left, a.bottom - a.top);
        ctx.clip();
        bands.forEach((b, i) => {
          const end = b.end >= b.begin ? b.end : xmax;
          const x0 = Math.max(a.left, xs.getPixelForValue(b.begin));
          const x1 = Math.min(a.right, xs.getPixelForValue(end));
          if (x1 < a.left || x0 > a.right) return;
          const w = Math.max(1, x1 - x0);
          ctx.fillStyle = BAND_FILL[i % BAND_FILL.length];
          ctx.fillRect(x0, a.top, w, a.bottom - a.top);
          ctx.fillStyle = BAND_EDGE[i % BAND_EDGE.length];
          ctx.fillRect(x0, a.top, 1, a.bottom - a.top);
          // Labels in two rows so neighbouring short stages do not write over each other.
          ctx.font = '600 11px system-ui, sans-serif';
          ctx.fillStyle = '#3a4456';
          ctx.textBaseline = 'top';
          const row = i % 2;
          let text = b.label;
          const room = Math.max(w - 6, 0);
          while (text.length > 1 && ctx.measureText(text).width > room) text = text.slice(0, -1);
          if (text !== b.label && text.length > 1) text = text.slice(0, -1) + '\u2026';
          if (room >= 10) ctx.fillText(text, x0 + 4, a.top + 4 + row * 14);
          drawn.push(b.label);
        });
        ctx.restore();
        state.bands = drawn;
      },
    };

    const peakLabelPlugin = {
      id: 'memscopePeakLabel',
      afterDatasetsDraw(chart) {
        if (!peak) return;
        const di = chart.data.datasets.findIndex((d) => d.memscopePeak);
        const el = chart.getDatasetMeta(di).data[0];
        if (!el || !chart.isDatasetVisible(di)) return;
        const { ctx, chartArea: a } = chart;
        const text = peak.label || 'peak ' + fmtBytes(peak.bytes);
        ctx.save();
        ctx.font = '600 12px system-ui, sans-serif';
        const w = ctx.measureText(text).width + 12;
        const h = 20;
        let x = el.x + 10;
        if (x + w > a.right) x = el.x - 10 - w;
        x = Math.max(a.left, x);
        const y = Math.max(a.top, el.y - h - 8);
        ctx.fillStyle = 'rgba(255, 255, 255, 0.92)';
        ctx.strokeStyle = '#D55E00';
        ctx.lineWidth = 1;
        ctx.beginPath();
        ctx.rect(x, y, w, h);
        ctx.fill();
        ctx.stroke();
        ctx.fillStyle = '#8a3300';
        ctx.textBaseline = 'middle';
        ctx.fillText(text, x + 6, y + h / 2);
        ctx.restore();
      },
    };

    const statePlugin = {
      id: 'memscopeState',
      afterRender(chart) {
        state.series = [];
        chart.data.datasets.forEach((ds, di) => {
          if (ds.memscopePeak) {
            const p = ds.data[0];
            state.peak = {
              series: ds.memscopePeak.series, t: p.x, bytes: p.y, label: ds.memscopePeak.label,
              drawn: chart.getDatasetMeta(di).data.length === 1,
            };
            return;
          }
          let max = null;  // the highest point drawn, to compare with the known peak
          for (const p of ds.data) if (max === null || p.y > max.y) max = p;
          state.series.push({
            name: ds.label,
            max: max ? { t: max.x, bytes: max.y } : null,
            points: ds.data.length,
            elements: chart.getDatasetMeta(di).data.length,
            original_points: ds.memscope.original_points,
            sampled: ds.memscope.sampled,
            step: ds.memscope.step,
            dashed: (ds.borderDash || []).length > 0,
            on_top: (ds.order || 0) < 0,
          });
        });
        state.y_title = chart.options.scales.y.title.display ? chart.options.scales.y.title.text
          : null;
        chartDone = true;
        publish();
      },
    };

    const legendDefaults = Chart.defaults.plugins.legend.labels.generateLabels;
    // eslint-disable-next-line no-new
    new Chart(canvas, {
      type: 'line',
      data: { datasets },
      plugins: [bandPlugin, peakLabelPlugin, statePlugin],
      options: {
        parsing: false,
        normalized: true,
        animation: false,
        responsive: true,
        maintainAspectRatio: false,
        spanGaps: true,
        interaction: { mode: 'memscopeTime', intersect: false },
        layout: { padding: { top: 4, right: 12 } },
        scales: {
          x: {
            type: 'linear',
            min: xmin,
            max: xmax,
            title: { display: true, text: data.x_label || 'time (s)', color: '#5a6374' },
            ticks: { callback: (v) => fmtTime(Number(v), span), maxRotation: 0, color: '#5a6374' },
            grid: { color: '#eef1f5' },
          },
          y: {
            type: 'linear',
            min: 0,
            max: yMax,
            title: { display: true, text: data.y_label || 'memory', color: '#5a6374' },
            ticks: { stepSize: yStep, callback: (v) => fmtTick(Number(v)), color: '#5a6374' },
            grid: { color: '#eef1f5' },
          },
        },
        plugins: {
          decimation: { enabled: false },  // done by memscope, keeping every peak
          legend: {
            position: 'bottom',
            labels: {
              // The lines in the order given, the peak marker last.
              sort: (a, b) => {
                const pa = a.text === 'peak' ? 1 : 0;
                const pb = b.text === 'peak' ? 1 : 0;
                return pa - pb || a.datasetIndex - b.datasetIndex;
              },
              usePointStyle: true,
              pointStyleWidth: 18,
              boxHeight: 8,
              color: '#1d2330',
              // Sampled lines say so: their value between samples is not known.
              generateLabels(chart) {
                const labels = legendDefaults(chart);
                for (const l of labels) {
                  const ds = chart.data.datasets[l.datasetIndex];
                  if (ds.memscope && ds.memscope.sampled && !/sampled/i.test(l.text)) {
                    l.text += ' (sampled)';
                  }
                  if (!ds.memscopePeak) l.pointStyle = 'line';
                }
                return labels;
              },
            },
          },
          tooltip: {
            backgroundColor: 'rgba(24, 30, 42, 0.94)',
            padding: 10,
            bodyFont: { family: 'ui-monospace, "DejaVu Sans Mono", monospace', size: 12 },
            itemSort: (a, b) => b.raw.y - a.raw.y,
            callbacks: {
              title: (items) => (items.length ? 't = ' + fmtTime(items[0].raw.x, 0) : ''),
              label: (item) => {
                const ds = item.dataset;
                if (ds.memscopePeak) return (ds.memscopePeak.label || 'peak') + '';
                return ds.label + ': ' + fmtBytes(item.raw.y);
              },
              footer: (items) => {
                if (!items.length) return '';
                const t = items[0].raw.x;
                return bands
                  .filter((b) => t >= b.begin && (b.end < b.begin || t <= b.end))
                  .map((b) => 'stage ' + b.label + (b.detail ? ': ' + b.detail : ''));
              },
            },
          },
        },
      },
    });
  }

  // ---- Segment map ---------------------------------------------------------------------
  const STATE_COLOURS = {
    active_allocated: '#0072B2',
    active_pending_free: '#E69F00',
    inactive: '#D3DAE3',
  };
  const MAX_ROWS = 1500;  // a canvas taller than ~32k pixels is not drawn by browsers

  function drawSegments(map) {
    const canvas = document.getElementById('memscope-segments');
    const tip = document.getElementById('memscope-segments-tip');
    const box = canvas.parentElement;
    // Consecutive segments that draw alike are one row, "20.00 MiB × 47", so a map of hundreds
    // of alike segments stays short: the same size and the same runs of block states (two
    // allocated blocks side by side draw as one allocated run).
    const layout = (s) => {
      const runs = [];
      for (const b of s.blocks) {
        const last = runs[runs.length - 1];
        if (last && last.state === b.state && last.end === b.offset) last.end += b.size;
        else runs.push({ state: b.state, begin: b.offset, end: b.offset + b.size });
      }
      return s.size + ':' + runs.map((r) => r.begin + '-' + r.end + ' ' + r.state).join(',');
    };
    const groups = [];
    for (const seg of map.segments) {
      const last = groups[groups.length - 1];
      const key = layout(seg);
      if (last && last.key === key) {
        last.count++;
        last.blocks += seg.blocks.length;
      } else {
        groups.push({ key, seg, count: 1, blocks: seg.blocks.length });
      }
    }
    const shown = groups.slice(0, MAX_ROWS);
    const segs = shown.map((g) => Object.assign({}, g.seg, { count: g.count }));
    // Thinner rows when there are many, so the map stays a few screens tall.
    const rowH = segs.length > 60 ? 10 : 16;
    const gap = segs.length > 60 ? 4 : 7;
    const labelW = 170;
    const width = Math.max(box.clientWidth, 480);
    const height = Math.max(segs.length * (rowH + gap), rowH);
    const ratio = window.devicePixelRatio || 1;
    canvas.width = Math.round(width * ratio);
    canvas.height = Math.round(height * ratio);
    canvas.style.width = width + 'px';
    canvas.style.height = height + 'px';
    const ctx = canvas.getContext('2d');
    ctx.scale(ratio, ratio);
    const barMax = width - labelW - 8;
    const largest = segs.reduce((m, s) => Math.max(m, s.size), 1);
    const rows = [];
    ctx.font = (rowH < 16 ? '10px' : '12px') + ' ui-monospace, "DejaVu Sans Mono", monospace';
    ctx.textBaseline = 'middle';
    segs.forEach((seg, i) => {
      const y = i * (rowH + gap);
      const w = Math.max(3, (barMax * seg.size) / largest);
      ctx.fillStyle = '#5a6374';
      ctx.fillText(fmtBytes(seg.size) + (seg.count > 1 ? ' \u00d7 ' + seg.count : ''), 0,
        y + rowH / 2);
      const rects = [];
      for (const b of seg.blocks) {
        const bx = labelW + (seg.size ? (w * b.offset) / seg.size : 0);
        const bw = Math.max(1, seg.size ? (w * b.size) / seg.size : w);
        ctx.fillStyle = STATE_COLOURS[b.state] || '#999999';
        ctx.fillRect(bx, y, bw, rowH);
        rects.push({ x: bx, w: bw, block: b });
      }
      ctx.strokeStyle = 'rgba(29, 35, 48, 0.35)';
      ctx.lineWidth = 1;
      ctx.strokeRect(labelW + 0.5, y + 0.5, w - 1, rowH - 1);
      rows.push({ y, seg, rects, w });
    });
    canvas.addEventListener('mousemove', (e) => {
      const r = canvas.getBoundingClientRect();
      const x = e.clientX - r.left;
      const y = e.clientY - r.top;
      const row = rows[Math.floor(y / (rowH + gap))];
      let hit = null;
      if (row && y - row.y <= rowH && x >= labelW && x <= labelW + row.w) {
        for (const rect of row.rects) if (x >= rect.x && x <= rect.x + rect.w) hit = rect;
      }
      if (!hit) { tip.hidden = true; return; }
      const b = hit.block;
      tip.textContent = (row.seg.count > 1 ? row.seg.count + ' segments alike; the first:\n' : '') +
        (row.seg.label ? row.seg.label + '\n' : '') +
        fmtBytes(b.size) + ' ' + b.state.replace(/_/g, ' ') + (b.label ? '\n' + b.label : '');
      tip.hidden = false;
      tip.style.left = Math.min(x + 14, width - 300) + 'px';
      tip.style.top = y + 14 + 'px';
    });
    canvas.addEventListener('mouseleave', () => { tip.hidden = true; });
    state.segments = segs.reduce((n, s) => n + s.count, 0);
    state.segment_rows = segs.length;
    state.blocks = shown.reduce((n, g) => n + g.blocks, 0);
    mapDone = true;
    publish();
  }

  // ---- Tables --------------------------------------------------------------------------
  const SCALE = { B: 1, KiB: 2 ** 10, MiB: 2 ** 20, GiB: 2 ** 30, TiB: 2 ** 40, PiB: 2 ** 50,
    KB: 1e3, MB: 1e6, GB: 1e9, TB: 1e12, ms: 1e-3, s: 1, us: 1e-6 };
  function sortKey(text) {
    const m = /^\s*([-+]?[\d,]*\.?\d+(?:e[-+]?\d+)?)\s*([A-Za-z%]*)/.exec(text);
    if (!m) return null;
    const v = parseFloat(m[1].replace(/,/g, ''));
    return v * (SCALE[m[2]] || 1);
  }
  function makeSortable(table) {
    const heads = table.querySelectorAll('thead th');
    heads.forEach((th, col) => {
      th.tabIndex = 0;
      const sort = () => {
        const asc = th.getAttribute('aria-sort') !== 'ascending';
        heads.forEach((h) => h.removeAttribute('aria-sort'));
        th.setAttribute('aria-sort', asc ? 'ascending' : 'descending');
        const body = table.tBodies[0];
        const rows = Array.from(body.rows);
        rows.sort((ra, rb) => {
          const a = ra.cells[col] ? ra.cells[col].textContent : '';
          const b = rb.cells[col] ? rb.cells[col].textContent : '';
          const ka = sortKey(a);
          const kb = sortKey(b);
          const c = ka !== null && kb !== null ? ka - kb : a.localeCompare(b);
          return asc ? c : -c;
        });
        for (const r of rows) body.appendChild(r);
      };
      th.addEventListener('click', sort);
      th.addEventListener('keydown', (e) => { if (e.key === 'Enter') sort(); });
    });
  }

  document.querySelectorAll('table.data').forEach(makeSortable);
  if (data.series && data.series.length) drawChart();
  if (data.segment_map) drawSegments(data.segment_map);
  publish();
})();
