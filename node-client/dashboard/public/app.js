// The dashboard's page: a job list with a submit form (#/), and a job page (#/jobs/<id>),
// both fed by Server-Sent Events. Plain DOM and ES modules, no framework, no build step;
// charts by uPlot (served from node_modules).
import { listPage } from '/list.js';
import { jobPage } from '/job.js';
import { comparePage } from '/compare.js';

const main = document.getElementById('main');
let cleanup = () => {};

function route() {
  cleanup();
  const m = /^#\/jobs\/([A-Za-z0-9_.-]+)$/.exec(location.hash);
  const c = /^#\/compare\/([A-Za-z0-9_.,-]+)$/.exec(location.hash);
  if (m) cleanup = jobPage(main, m[1]);
  else if (c) cleanup = comparePage(main, c[1].split(',').filter(Boolean));
  else cleanup = listPage(main);
  main.focus({ preventScroll: true });
}
window.addEventListener('hashchange', route);
route();
