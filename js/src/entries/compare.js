// jaxviz's compare view as a widget (jaxviz.view.compare.CompareWidget, and the HTML of
// jaxviz.compare(a, b)): graph/compareview.js draws it. Model trait: `payload`
// (ComparePayload).

import { renderCompare } from "../graph/compareview.js";

export default { render: renderCompare };
