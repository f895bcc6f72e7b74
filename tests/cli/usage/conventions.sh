# CLI conventions (issue 16): an unknown command names the nearest one and lists them all; usage
# errors take the `engramctl <cmd>: ...` form with the flag's name and never echo a prompt;
# --version names the commit and the optional parts; bash completion comes from the CLI itself.
try() { local code=0; "$@" > out.txt 2> err.txt || code=$?; echo "exit $code: $(head -n1 err.txt)"; }
try $E frobnicate
try $E bulid --help
try $E
try $E run --top-k abc "my private prompt"
grep -c "my private prompt" err.txt || true
try $E verify --bogus t.engram
try $E build --memory
$E --version | head -n1 | sed -E "s/commit [^)]*/commit X/"
$E completion bash > c.bash
bash -c 'source c.bash; complete -p engramctl; COMP_WORDS=(engramctl so); COMP_CWORD=1; _engramctl; echo "${COMPREPLY[*]}"
COMP_WORDS=(engramctl verify --js); COMP_CWORD=2; _engramctl; echo "${COMPREPLY[*]}"'
