// The dashboard's page: a job list with a submit form (#/), and a job page (#/jobs/<id>),
// both fed by Server-Sent Events. Plain DOM and ES modules, no framework, no build step;
// charts by uPlot (served from node_modules).
import { listPage } from '/list.js';
import { jobPage } from '/job.js';

const main = document.getElementById('main');
let cleanup = () => {};

function route() {
  cleanup();
  const m = /^#\/jobs\/([A-Za-z0-9_.-]+)$/.exec(location.hash);
  cleanup = m ? jobPage(main, m[1]) : listPage(main);
  main.focus({ preventScroll: true });
}
window.addEventListener('hashchange', route);
route();
