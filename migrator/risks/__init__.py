"""Compile risks (NM8xx): what makes TorchNeuron recompile or hang. Each rule is a module with its definition
and its `find(code)`, which reads a file's code as `usercode.reading` parses it (Python, notebook cells, shell
commands); the checklist lists what they find (`registry.find_risks`). No rule rewrites: each names the codes
whose rewrite removes the risk (`fixed_by`), so the checklist shows a risk the migrator already handles as a
check."""
