// The style transfer page: pick images, start a job, follow its Server-Sent Events, show the gallery.
// Plain JavaScript, no build step, nothing from other hosts.
"use strict";

const $ = (id) => document.getElementById(id);
const state = { content: null, contentSize: null, unreadable: false, styles: [], masks: [], painting: null, job: null, source: null, losses: [],
                options: null, resultId: null, step: null, contentMask: { file: null, canvas: null, painted: false } };
// A painted mask is kept at the photo's own size, its long side at most this (the server resizes masks with the photo)
// unless its short side would go under MASK_SHORT_SIDE (rounding it would change the aspect ratio by over 1 %).
const MASK_LONG_SIDE = 1024, MASK_SHORT_SIDE = 50;
// A mask's width/height may differ from the photo's by this fraction (losses/masks.py's ASPECT_TOLERANCE).
const ASPECT_TOLERANCE = 0.02;

async function api(path, init) {
  const response = await fetch(path, { credentials: "same-origin", ...init });
  if (!response.ok) {
    let detail = `${response.status} ${response.statusText}`;
    try { const body = await response.json(); if (body && body.detail) detail = typeof body.detail === "string" ? body.detail : JSON.stringify(body.detail); } catch (e) { /* not JSON */ }
    throw new Error(detail);
  }
  return response.status === 204 ? null : response.json();
}

function showError(message) {
  const box = $("error");
  box.textContent = message || "";
  box.hidden = !message;
}

function thumb(file) {
  const img = document.createElement("img");
  img.src = URL.createObjectURL(file);
  img.alt = file.name;
  img.title = file.name;
  return img;
}

function setContent(file) {
  showError("");  // a new pick answers the old complaint
  state.content = file;
  $("content-thumbs").replaceChildren(...(file ? [thumb(file)] : []));
  state.contentSize = null;
  state.unreadable = false;
  renderMasks();
  if (!file) return;
  createImageBitmap(file).then((bitmap) => {  // its upright size (EXIF turned), as the browser shows it
    if (state.content !== file) return;  // a later pick won
    const size = { width: bitmap.width, height: bitmap.height };
    bitmap.close();
    state.contentSize = size;
    const photo = $("paint-photo");
    if (photo.src) URL.revokeObjectURL(photo.src);
    photo.src = URL.createObjectURL(file);
    refitMasks(size);
  }).catch(() => {  // the server may still read it (a TIFF): only painting waits for a photo the browser shows
    if (state.content === file) { state.unreadable = true; renderMasks(); }
  });
}

function setStyles(files) {
  showError("");
  const kept = new Map(state.styles.map((style, i) => [style, state.masks[i]]));  // a style keeps its mask
  state.styles = files;
  state.masks = files.map((style) => kept.get(style) || { file: null, canvas: null, painted: false });
  if (state.painting && state.painting !== state.contentMask && !state.masks.includes(state.painting)) closePainter();  // its style went
  $("style-thumbs").replaceChildren(...files.map(thumb));
  renderMasks();
}

// Masks: for each style an uploaded file or a painting over the photo (the latest counts), sent as the
// same style_mask files; for the photo itself one more, the content_mask (white: its shapes are kept there).
// The painting is a canvas of the photo's aspect ratio; its alpha is the mask.

function maskSize(size) {
  const scale = Math.min(1, Math.max(MASK_LONG_SIDE / Math.max(size.width, size.height),
                                     MASK_SHORT_SIDE / Math.min(size.width, size.height)));
  return { width: Math.max(1, Math.round(size.width * scale)), height: Math.max(1, Math.round(size.height * scale)) };
}

function sameShape(a, b) {
  return Math.abs(Math.log((a.width / a.height) / (b.width / b.height))) <= Math.log1p(ASPECT_TOLERANCE);
}

function paintCanvas(size) {
  const canvas = document.createElement("canvas");
  canvas.width = size.width; canvas.height = size.height;
  canvas.className = "mask-canvas";
  canvas.setAttribute("aria-label", "the mask: drag to paint it over the photo");
  let last = null;
  const at = (e) => {
    const box = canvas.getBoundingClientRect();
    return { x: (e.clientX - box.left) * canvas.width / box.width, y: (e.clientY - box.top) * canvas.height / box.height };
  };
  canvas.addEventListener("pointerdown", (e) => {
    e.preventDefault();
    canvas.setPointerCapture(e.pointerId);
    const entry = state.painting;
    if (entry && entry.file) { entry.file = null; renderMasks(); }  // the painting replaces an uploaded mask
    last = at(e);
    stroke(canvas, last, last);
  });
  canvas.addEventListener("pointermove", (e) => {
    if (!last) return;
    const point = at(e);
    stroke(canvas, last, point);
    last = point;
  });
  for (const name of ["pointerup", "pointercancel"]) {
    canvas.addEventListener(name, () => {
      if (!last) return;
      last = null;
      if (state.painting) { state.painting.painted = true; renderMasks(); }
    });
  }
  return canvas;
}

function stroke(canvas, from, to) {  // soft round dabs a quarter radius apart
  const ctx = canvas.getContext("2d");
  const radius = Math.max(0.5, Number($("brush-size").value) / 100 * Math.max(canvas.width, canvas.height) / 2);
  ctx.globalCompositeOperation = $("brush-erase").checked ? "destination-out" : "source-over";
  const steps = Math.max(1, Math.ceil(Math.hypot(to.x - from.x, to.y - from.y) / (radius / 4)));
  for (let i = 0; i <= steps; i++) {
    const x = from.x + (to.x - from.x) * i / steps, y = from.y + (to.y - from.y) * i / steps;
    const soft = ctx.createRadialGradient(x, y, 0, x, y, radius);
    soft.addColorStop(0, "rgba(255, 0, 128, 1)"); soft.addColorStop(0.6, "rgba(255, 0, 128, 1)");
    soft.addColorStop(1, "rgba(255, 0, 128, 0)");
    ctx.fillStyle = soft;
    ctx.beginPath(); ctx.arc(x, y, radius, 0, 2 * Math.PI); ctx.fill();
  }
  ctx.globalCompositeOperation = "source-over";
}

function maskLabel(entry) {  // how the page names a mask's owner
  const i = state.masks.indexOf(entry);
  return i < 0 ? "the photo" : `style ${i + 1}`;
}

function refitMasks(size) {  // a new photo: paintings of its shape are resized to it, others dropped
  const target = maskSize(size), dropped = [];
  [...state.masks, state.contentMask].forEach((entry) => {
    if (!entry.canvas) return;
    if (!sameShape(entry.canvas, target)) {
      if (entry.painted) dropped.push(maskLabel(entry));
      entry.canvas = null; entry.painted = false;
      return;
    }
    const canvas = paintCanvas(target);
    canvas.getContext("2d").drawImage(entry.canvas, 0, 0, target.width, target.height);
    entry.canvas = canvas;
  });
  if (state.painting) { const entry = state.painting; closePainter(); openPainter(entry); }  // on the new photo
  renderMasks();
  if (dropped.length) showError(`The new photo has another shape: the painted mask of ${dropped.join(", ")} was removed.`);
}

function openPainter(entry) {
  const i = state.masks.indexOf(entry);
  if ((i < 0 && entry !== state.contentMask) || !state.contentSize) return;
  if (!entry.canvas) entry.canvas = paintCanvas(maskSize(state.contentSize));
  state.painting = entry;
  $("paint-area").replaceChildren($("paint-photo"), entry.canvas);
  $("painter-title").textContent = i < 0 ? "Painting where the photo's shapes are kept (unpainted: the styles alone)"
    : `Painting where style ${i + 1} (${state.styles[i].name}) goes`;
  $("painter").hidden = false;
  renderMasks();
}

function closePainter() {
  state.painting = null;
  $("painter").hidden = true;
  $("paint-area").replaceChildren($("paint-photo"));
  renderMasks();
}

function maskText(entry) {
  if (entry.file) return `mask: ${entry.file.name}`;
  if (entry.canvas && entry.painted) return "painted mask";
  return "no mask";
}

function renderMasks() {
  const rows = state.styles.map((style, i) => maskRow(state.masks[i], String(i), `Style ${i + 1}: ${style.name}`,
                                                      `style ${i + 1} (${style.name})`, `style ${i + 1}`));
  rows.push(maskRow(state.contentMask, "content", "The photo: where its shapes are kept", "the photo", "the photo"));
  $("mask-list").replaceChildren(...rows);
}

function maskRow(entry, key, title, long, short) {  // one mask's line: Upload / Paint / No mask, and what it has
  const item = document.createElement("li");
  item.dataset.index = key;
  const name = document.createElement("span");
  name.className = "mask-name"; name.textContent = title;
  const upload = document.createElement("label");
  upload.className = "button";
  upload.textContent = "Upload a mask";
  const input = document.createElement("input");
  input.type = "file"; input.accept = "image/*"; input.className = "mask-file";
  input.setAttribute("aria-label", `Mask image for ${long}`);
  input.addEventListener("change", () => {
    const file = images(input.files)[0];
    if (!file) return;
    showError("");
    entry.file = file;  // the upload replaces a painting
    entry.canvas = null; entry.painted = false;
    if (state.painting === entry) closePainter(); else renderMasks();
  });
  upload.append(input);
  const paint = document.createElement("button");
  paint.type = "button"; paint.className = "mask-paint";
  paint.textContent = state.painting === entry ? "Painting..." : "Paint";
  paint.disabled = !state.contentSize || state.painting === entry;
  paint.title = state.contentSize ? "" : state.unreadable ? "this browser cannot show the photo: upload a mask"
    : "pick the photo first";
  paint.setAttribute("aria-label", `Paint the mask of ${short} over the photo`);
  paint.addEventListener("click", () => openPainter(entry));
  const none = document.createElement("button");
  none.type = "button"; none.className = "mask-none"; none.textContent = "No mask";
  none.disabled = maskText(entry) === "no mask";
  none.setAttribute("aria-label", `No mask for ${short}`);
  none.addEventListener("click", () => {
    entry.file = null; entry.canvas = null; entry.painted = false;
    if (state.painting === entry) closePainter(); else renderMasks();
  });
  const shown = document.createElement("span");
  shown.className = "mask-state"; shown.textContent = maskText(entry);
  item.append(name, upload, paint, none, shown);
  return item;
}

function paintedGrey(canvas) {  // the mask's grey levels (0-255), one a pixel: the painting's alpha
  const pixels = canvas.getContext("2d").getImageData(0, 0, canvas.width, canvas.height).data;
  const grey = new Uint8ClampedArray(canvas.width * canvas.height);
  for (let p = 0; p < grey.length; p++) grey[p] = pixels[4 * p + 3];
  return grey;
}

async function uploadedGrey(file, size) {  // an uploaded mask's grey levels at ``size``, as the server reads it
  const bitmap = await createImageBitmap(file);
  const canvas = document.createElement("canvas");
  canvas.width = size.width; canvas.height = size.height;
  const ctx = canvas.getContext("2d");
  ctx.fillStyle = "#fff"; ctx.fillRect(0, 0, size.width, size.height);  // transparency over white
  ctx.drawImage(bitmap, 0, 0, size.width, size.height);
  bitmap.close();
  const pixels = ctx.getImageData(0, 0, size.width, size.height).data;
  const grey = new Uint8ClampedArray(size.width * size.height);
  for (let p = 0; p < grey.length; p++) grey[p] = 0.299 * pixels[4 * p] + 0.587 * pixels[4 * p + 1] + 0.114 * pixels[4 * p + 2];
  return grey;
}

function greyPNG(grey, size) {
  const canvas = document.createElement("canvas");
  canvas.width = size.width; canvas.height = size.height;
  const image = new ImageData(size.width, size.height);
  for (let p = 0; p < grey.length; p++) image.data.set([grey[p], grey[p], grey[p], 255], 4 * p);
  canvas.getContext("2d").putImageData(image, 0, 0);
  return new Promise((resolve, reject) => canvas.toBlob((blob) => blob ? resolve(blob) : reject(new Error("could not encode a mask")), "image/png"));
}

async function maskFiles() {
  // The style_mask files, in style order. The server gives masks to the first styles; a style without one
  // before a masked style is sent what no mask covers (clamp(1 - sum)), the share the server gives it after.
  const size = state.contentSize && maskSize(state.contentSize);
  const given = state.masks.map((entry, i) => givenMask(entry, `painted-mask-${i + 1}.png`));
  const last = given.findLastIndex((g) => g !== null);
  if (last < 0) return [];
  const missing = given.slice(0, last).map((g, i) => g ? 0 : i + 1).filter((n) => n);
  let rest = null;
  if (missing.length) {
    rest = new Uint8ClampedArray(size.width * size.height).fill(255);
    for (const g of given.filter((g) => g !== null)) {
      const grey = g.grey || await uploadedGrey(g.blob, size);
      for (let p = 0; p < rest.length; p++) rest[p] -= grey[p];
    }
    if (!rest.some((v) => v > 0)) {
      throw new Error(`The masks cover the whole photo: style ${missing.join(", ")} without a mask has nowhere to go; give it a mask or make the others smaller.`);
    }
  }
  const files = [];
  for (let i = 0; i <= last; i++) {
    const g = given[i];
    if (g === null) files.push({ blob: await greyPNG(rest, size), name: `rest-${i + 1}.png` });
    else files.push({ blob: g.blob || await greyPNG(g.grey, size), name: g.name });
  }
  return files;
}

function givenMask(entry, name) {  // a mask as the page sends it: the upload, or the painting's grey levels; null: none
  if (entry.file) return { blob: entry.file, name: entry.file.name };
  if (entry.canvas && entry.painted) {
    const grey = paintedGrey(entry.canvas);
    if (grey.some((v) => v > 0)) return { grey, name };  // an erased-away painting is no mask
  }
  return null;
}

async function contentMaskFile() {  // the content_mask file, or null
  const given = givenMask(state.contentMask, "painted-content-mask.png");
  if (!given) return null;
  const canvas = state.contentMask.canvas;
  return { blob: given.blob || await greyPNG(given.grey, { width: canvas.width, height: canvas.height }), name: given.name };
}

function images(list) {
  return Array.from(list || []).filter((f) => f.type === "" || f.type.startsWith("image/"));
}

function wireDrop(drop, input, onFiles) {
  input.addEventListener("change", () => onFiles(images(input.files)));
  for (const name of ["dragenter", "dragover"]) {
    drop.addEventListener(name, (e) => { e.preventDefault(); drop.classList.add("over"); });
  }
  for (const name of ["dragleave", "drop"]) {
    drop.addEventListener(name, () => drop.classList.remove("over"));
  }
  drop.addEventListener("drop", (e) => { e.preventDefault(); onFiles(images(e.dataTransfer.files)); });
}

async function fileFrom(url, name) {
  const response = await fetch(url, { credentials: "same-origin" });
  if (!response.ok) throw new Error(`could not fetch ${name}: ${response.status}`);
  const blob = await response.blob();
  return new File([blob], name, { type: blob.type || "image/png" });
}

function weightText(value) {
  return value >= 1000 ? value.toExponential(1).replace("e+", "e") : String(Math.round(value * 100) / 100);
}

function styleWeight() {  // the preset's own value until the slider is moved (its steps of 0.1 in log10 miss 300)
  const slider = $("style-weight-exp");
  return slider.dataset.exact ? Number(slider.dataset.exact) : Math.pow(10, Number(slider.value));
}

function serverRuns() {  // the server's network runs the job: "server", or imagenet's VGG19 where the server fell back
  const fallback = state.options.fallback;
  return $("weights").value === "server"
    || Boolean(fallback && $("weights").value === fallback.weights && $("model").value === fallback.model);
}

function applyPreset(name) {  // the server's weights may take another scale (Caffe's): their own loss weights
  const server = serverRuns() && state.options.server_presets;
  const preset = (server ? state.options.server_presets : state.options.presets)[name];
  if (!preset) return;
  const weight = (preset.style_weights || {})[$("style-loss").value] || preset.style_weight;  // each style loss its own
  $("style-weight-exp").value = Math.log10(weight).toFixed(1);
  $("style-weight-exp").dataset.exact = String(weight);
  $("content-weight").value = preset.content_weight;
  $("style-weight-value").textContent = weightText(styleWeight());
}

function fillSelect(select, values, chosen) {
  select.replaceChildren(...values.map((v) => { const o = document.createElement("option"); o.value = v; o.textContent = v || "auto"; o.selected = v === chosen; return o; }));
}

function fitNetwork() {  // the server's weights come with the server's network: its model is not the form's choice
  const server = $("weights").value === "server";
  if (server) $("model").value = state.options.defaults.model;
  $("model").disabled = server;
  $("model").title = server ? "the network of the server's weights" : "";
}

async function loadOptions() {
  const options = state.options = await api("/api/options");
  fillSelect($("preset"), Object.keys(options.presets), options.defaults.preset);
  fillSelect($("preserve-colors"), options.preserve_colors, options.defaults.preserve_colors);
  fillSelect($("style-loss"), options.style_losses, options.defaults.style_loss);
  fillSelect($("weights"), options.weights, options.defaults.weights);
  fillSelect($("model"), options.models, options.defaults.model);
  fillSelect($("parametrization"), ["", ...options.parametrizations], "");  // auto: fourier with Fast, pixels without
  fitNetwork();
  $("weights-note").textContent = options.fallback ? options.fallback.note : "";  // offline: what runs, and why
  $("weights-note").hidden = !options.fallback;
  // Each number field's range, as StyleConfig declares it (size and steps: at most what this server allows).
  for (const [name, setting] of Object.entries(options.settings)) {
    const input = document.querySelector(`input[type=number][name="${name}"]`);
    if (!input) continue;
    if (setting.minimum !== null) input.min = setting.minimum;
    if (setting.maximum !== null) input.max = setting.maximum;
  }
  $("steps").value = options.defaults.steps;
  $("seed").value = options.defaults.seed;
  applyPreset(options.defaults.preset);
  const list = $("sample-list");
  list.replaceChildren(...options.samples.map((name) => {
    const box = document.createElement("span");
    box.className = "sample";
    const img = document.createElement("img");
    img.src = `/static/samples/${name}`;
    img.alt = name;
    const asContent = document.createElement("button");
    asContent.type = "button"; asContent.textContent = "content";
    asContent.addEventListener("click", async () => setContent(await fileFrom(img.src, name)));
    const asStyle = document.createElement("button");
    asStyle.type = "button"; asStyle.textContent = "+ style";
    asStyle.addEventListener("click", async () => setStyles([...state.styles, await fileFrom(img.src, name)]));
    box.append(img, asContent, asStyle);
    return box;
  }));
}

async function formData() {
  const data = new FormData();
  data.append("content", state.content, state.content.name);
  for (const style of state.styles) data.append("style", style, style.name);
  for (const mask of await maskFiles()) data.append("style_mask", mask.blob, mask.name);
  const keep = await contentMaskFile();
  if (keep) data.append("content_mask", keep.blob, keep.name);
  for (const [name, id] of [["size", "size"], ["steps", "steps"], ["content_weight", "content-weight"], ["preset", "preset"],
                            ["preserve_colors", "preserve-colors"], ["style_blend", "style-blend"], ["style_loss", "style-loss"], ["seed", "seed"], ["weights", "weights"],
                            ["model", "model"], ["average", "average"], ["parametrization", "parametrization"]]) {
    const value = $(id).value.trim();
    if (value !== "") data.append(name, value);
  }
  data.append("style_weight", String(styleWeight()));
  data.append("fast", $("fast").checked ? "true" : "false");
  return data;
}

function drawLosses() {
  const canvas = $("loss-curve");
  const ctx = canvas.getContext("2d");
  ctx.clearRect(0, 0, canvas.width, canvas.height);
  const values = state.losses.filter((v) => v > 0).map(Math.log10);
  if (values.length < 2) return;
  const low = Math.min(...values), high = Math.max(...values), span = high - low || 1;
  const pad = 8, w = canvas.width - 2 * pad, h = canvas.height - 2 * pad;
  ctx.strokeStyle = "#3b5bdb"; ctx.lineWidth = 1.5; ctx.beginPath();
  values.forEach((v, i) => {
    const x = pad + (w * i) / (values.length - 1), y = pad + h * (1 - (v - low) / span);
    if (i === 0) ctx.moveTo(x, y); else ctx.lineTo(x, y);
  });
  ctx.stroke();
  ctx.fillStyle = "#666"; ctx.font = "11px sans-serif";
  ctx.fillText(Math.pow(10, high).toPrecision(3), pad, pad + 10);
  ctx.fillText(Math.pow(10, low).toPrecision(3), pad, canvas.height - pad);
}

function seconds(s) {
  if (s === null || s === undefined) return "";
  return s >= 90 ? `${Math.round(s / 60)} min` : `${Math.round(s)} s`;
}

function progressText(event, running) {
  const scale = event.scales > 1 ? ` · size ${event.scale + 1}/${event.scales}` : "";
  const left = running && event.eta !== null && event.eta >= 0.5 ? ` · about ${seconds(event.eta)} left` : "";
  return `${event.step} / ${event.total} evaluations${scale}${left}`;
}

function onStep(job, event) {
  const bar = $("progress");
  bar.max = event.total; bar.value = Math.min(event.step, event.total);
  state.step = event;
  $("progress-text").textContent = progressText(event, true);
  $("status").textContent = `Running: ${event.size[0]}x${event.size[1]} px, loss ${event.loss === null ? "not finite" : event.loss.toPrecision(4)}`;
  if (event.loss !== null) { state.losses.push(event.loss); drawLosses(); }
  if (event.preview !== null) {
    const img = $("preview");
    $("preview-figure").hidden = false;
    img.src = `/api/jobs/${job}/preview?n=${event.preview}`;
  }
}

function finish(job, event) {
  state.source.close();  // the last event: without this the browser would reconnect
  state.source = null;
  state.job = null;
  $("cancel").disabled = true;
  $("start").disabled = false;
  const words = { done: "Done", cancelled: "Cancelled", failed: "Failed" };
  let text = words[event.type] || event.type;
  if (event.result) text += `: ${event.result.width}x${event.result.height}, ${event.result.evaluations} evaluations in ${seconds(event.result.seconds)}`;
  if (event.stopped && event.stopped !== "done" && event.stopped !== event.type) text += ` (${event.stopped})`;
  $("status").textContent = text;
  if (state.step) $("progress-text").textContent = progressText(state.step, false);  // no time left after the end
  if (event.type === "done") { const bar = $("progress"); bar.value = bar.max; }
  if (event.error) showError(event.error);
  if (event.result) { showResult(event.result.id); $("preview-figure").hidden = true; }  // the result replaces "so far"
  refreshGallery();
}

function showResult(id) {
  state.resultId = id;
  const img = $("result");
  img.src = `/api/results/${id}/image`;
  $("result-figure").hidden = false;
  $("download-png").href = `/api/results/${id}/image?format=png&download=1`;
  $("download-jpeg").href = `/api/results/${id}/image?format=jpeg&download=1`;
  $("result-actions").hidden = false;
}

function queueText(position) {  // no position: an idle worker is taking the job
  return position ? `Waiting in the queue: position ${position}` : "Starting...";
}

function follow(job) {
  state.job = job;
  const source = state.source = new EventSource(`/api/jobs/${job}/events`);
  source.addEventListener("queued", (e) => { $("status").textContent = queueText(JSON.parse(e.data).position); });
  source.addEventListener("started", (e) => { $("status").textContent = `Started on ${JSON.parse(e.data).device}: loading the model...`; });
  source.addEventListener("step", (e) => onStep(job, JSON.parse(e.data)));
  for (const name of ["done", "cancelled", "failed"]) source.addEventListener(name, (e) => finish(job, JSON.parse(e.data)));
  source.onerror = () => {  // the browser retries by itself unless the server refused the stream
    if (source.readyState === EventSource.CLOSED && state.source === source) {
      state.source = null; state.job = null;
      $("cancel").disabled = true; $("start").disabled = false;
      showError("Lost the connection to the server (was it restarted?). Earlier results are in the gallery.");
      refreshGallery();
    }
  };
}

async function start(e) {
  e.preventDefault();
  showError("");
  if (!state.content) { showError("Pick a content image first."); return; }
  if (!state.styles.length) { showError("Pick at least one style image."); return; }
  $("start").disabled = true;
  $("result-actions").hidden = true;
  $("result-figure").hidden = true;
  $("preview-figure").hidden = true;
  $("preview").dataset.updates = "0";
  $("progress").value = 0;
  $("progress-text").textContent = "";
  state.step = null;
  state.losses = [];
  drawLosses();
  try {
    const job = await api("/api/jobs", { method: "POST", body: await formData() });
    $("status").textContent = queueText(job.position);
    $("progress").max = job.planned;  // what will run, in whole LBFGS steps of 20, from the start
    $("progress-text").textContent = `0 / ${job.planned} evaluations`;
    $("cancel").disabled = false;
    follow(job.id);
  } catch (err) {
    showError(err.message);
    $("start").disabled = false;
  }
}

async function cancel() {
  if (!state.job) return;
  $("cancel").disabled = true;
  try {
    await api(`/api/jobs/${state.job}/cancel`, { method: "POST" });
    $("status").textContent = "Cancelling: the image so far is kept...";
  } catch (err) { showError(err.message); }
}

function settingsText(entry) {
  const s = entry.settings || {};
  const parts = [`${entry.width}x${entry.height}`, `${entry.evaluations} evaluations`, `style weight ${weightText(s.style_weight)}`,
                 `content weight ${s.content_weight}`, `preset ${s.preset}`, `seed ${s.seed}`, `${s.model || "vgg19"}, weights ${s.weights}`];
  if (s.preserve_colors && s.preserve_colors !== "none") parts.push(`colours: ${s.preserve_colors}`);
  if (s.style_loss && s.style_loss !== "gram") parts.push(`${s.style_loss} style loss`);
  if (s.preprocess && s.preprocess !== "torchvision") parts.push(`${s.preprocess} preprocessing`);
  if (s.style_masks && s.style_masks.length) parts.push(`${s.style_masks.length} style mask${s.style_masks.length > 1 ? "s" : ""}`);
  if (s.content_mask) parts.push("content mask");
  if (s.fast) parts.push("fast");
  if (s.parametrization) parts.push(`moving ${s.parametrization}`);
  if (entry.stopped !== "done") parts.push(entry.stopped);
  const names = entry.names || {};
  return `${names.content || "?"} in the style of ${(names.styles || []).map((n) => n || "?").join(" + ")} · ${parts.join(", ")}`;
}

async function refreshGallery() {
  let results;
  try { results = (await api("/api/results")).results; } catch (err) { showError(err.message); return; }
  $("gallery-list").replaceChildren(...results.map((entry) => {
    const item = document.createElement("li");
    item.dataset.id = entry.id;
    const img = document.createElement("img");
    img.src = `/api/results/${entry.id}/image`; img.alt = "a result"; img.loading = "lazy";
    const meta = document.createElement("div");
    meta.className = "meta"; meta.textContent = settingsText(entry);
    const link = document.createElement("a");
    link.className = "button"; link.textContent = "PNG"; link.href = `/api/results/${entry.id}/image?format=png&download=1`;
    const remove = document.createElement("button");
    remove.type = "button"; remove.textContent = "Delete"; remove.className = "delete";
    remove.addEventListener("click", async () => {
      try { await api(`/api/results/${entry.id}`, { method: "DELETE" }); refreshGallery(); } catch (err) { showError(err.message); }
    });
    item.append(img, meta, link, document.createTextNode(" "), remove);
    return item;
  }));
}

function init() {
  wireDrop($("content-drop"), $("content-input"), (files) => { if (files.length) setContent(files[0]); });
  wireDrop($("style-drop"), $("style-input"), (files) => { if (files.length) setStyles(files); });
  $("preview").addEventListener("load", (e) => { e.target.dataset.updates = String(Number(e.target.dataset.updates) + 1); });
  $("style-weight-exp").addEventListener("input", () => {
    delete $("style-weight-exp").dataset.exact;
    $("style-weight-value").textContent = weightText(styleWeight());
  });
  $("preset").addEventListener("change", (e) => applyPreset(e.target.value));
  $("style-loss").addEventListener("change", () => applyPreset($("preset").value));
  $("weights").addEventListener("change", () => { fitNetwork(); applyPreset($("preset").value); });
  $("model").addEventListener("change", () => {  // offline, imagenet's VGG19 is the server's: its loss weights
    if (state.options.fallback) applyPreset($("preset").value);
  });
  $("options").addEventListener("submit", start);
  const brush = () => { $("brush-size-value").textContent = `${$("brush-size").value} %`; };
  $("brush-size").addEventListener("input", brush);
  brush();
  $("paint-clear").addEventListener("click", () => {
    const entry = state.painting;
    if (!entry || !entry.canvas) return;
    entry.canvas.getContext("2d").clearRect(0, 0, entry.canvas.width, entry.canvas.height);
    entry.painted = false;
    renderMasks();
  });
  $("paint-done").addEventListener("click", closePainter);
  $("cancel").addEventListener("click", cancel);
  $("use-as-content").addEventListener("click", async () => {
    if (state.resultId) setContent(await fileFrom(`/api/results/${state.resultId}/image`, `result-${state.resultId.slice(0, 8)}.png`));
    window.scrollTo({ top: 0, behavior: "smooth" });
  });
  $("run-again").addEventListener("click", () => { $("options").scrollIntoView({ behavior: "smooth" }); $("steps").focus(); });
  loadOptions().catch((err) => showError(err.message));
  refreshGallery();
}

document.addEventListener("DOMContentLoaded", init);
