"""Word list of the simulator's tokenizer (data; frozen: changing it changes every token id).

Built once from the most frequent words of English text (Python docstrings and the project's docs).
"""
WORDS = """
the is to and of in for if be or with this that it an return as are not by file from on object string decimal
will list class true name py can default returns value all line used function which when no set none data one
method module python only at use number argument path server type vllm given arguments self message first
instance per should request turtle has any bytes called log command read same then may false was but each must
text other token you so time its run size tokens call cache using pytest values optional header returned test
sglang new have error files code also version specified current lines like up example get into exception mode
two extendedcontext output result tuple does model json kv directory source format objects raise where
otherwise context names there passed args non than process create stream int user tool state address encoding
tests key after see memory do gb empty filename content end rfc option methods open dictionary import either
input raised strings we more sys socket port single character plugin case response named defaults functions
available write str usage found http options without base integer concurrency attributes attribute config
these prompt every defined chunk docs block before event thread add instead note both some they max ttft host
benchmark last start loop about print errors order parser level characters id prefix whether between raises pr
implementation copy spec sequence parameter package information protocol decode keyword them classes out
compare calls zero docker been os what length check most created url mapping io node metrics standard mean
close connection requests mamba next local through running handler system position containing parse plus tok
until dict api boot client support uses runs types their codec queue over flag match users graph xdist
internal item null gpu following always root once second subclass cuda headers index calling modules timeout
own buffer such valueerror specific already help callable count how point tools session pattern form frame
generated round aiperf done under shared def being matches full flags load record possible cannot ci ctr
binary src except real float encoded interface provided stop txt doesn handle tree speculative contains just
entry bin fixture byte recipe pass environment provides html representation parameters based quoted against
results because make generate keys batch re original mock override added fail left asyncio group numbers work
unix those info acceptance remove multiple field part constructor another were traceback logprobs extension
send raw convert find messages examples rate written charset dtype takes instances exact logger section
directories cpu mem fraction helper special search above archive engine library side logging foo inside bit
measured slots project glm mailbox screen different items simple future sh pool windows operation decoding
target top program since required want table maximum failure chat exist matching xml valid adds ip lock image
including ascii need reference coroutine here variable underlying main configuration equivalent way manager
abstract writing counter unconfirmed llm reading access unless while supplied documentation blocks operand
commands could try member serve contain would variables doctest limit accept throughput within range works
generator child fields back pid glmf style even msg compile script expected common else lists three sets
policy global according existing present separate multi exactly warm date needed corresponding useful generic
negative strict gives currently your itself arg change equal registered stack deprecated report capture models
newline directly install don color long whitespace supports counts elements failed cap closed exists fails obj
auto wait email transport pair datetime means iterable platform times gib include abc parsed parsing setting
total random network post allow stored setup sequences namespace vs logprob plain requested relative built via
turn stdout weights ms supported etc distribution made statement complete nan min completions flash checks
descriptor hit threads linear bound dev md torch itl warning tuples accepted too split members encode len uuid
link automatically exit parent compression many public venv gate bench ignored representing bytesio wrapper
compiler replace assert template shape rpc sgl iterator sent regular param doc enum worker gencodec exceptions
seconds necessary body still never needs converted invalid extra callback eof mappings draft median container
specify specifies control returning printed formatted passing actual cookie docstring core infinity pytester
opened details provide dir distutils reported allocated echo nvidia place usr execute hook register pairs
space across prints runtime build keyerror rules speed nodes hooks drift hermes below initialize packages
trace breakpoint right locale private testing patch precision subprocess metric llama paths contents executed
absolute prompts mime signature delete removed tar implement pep stderr syntax immediately whose bar entries
custom points positive debug decorator release canvas fixtures cookies ssl indicates lib checked registry
ready outputs least addresses kwargs identical static rank warmup guidellm dockerd old well appropriate
expression comparison normal difference task better ini handlers makes display application high frames https
allows creates received whole regex reports took delta machine pickle update join concurrent seen literal
openai gguf busybox occurs during unicode imported define several com wrapped builds reserved async typed
baseline driver readline implements indicating arbitrary similar zip mark year digits short everything
typeerror compute domain word loader smtp allowed append omitted element width now clear summary off respx cli
latency role inference rst slo operations missing signal nothing conversion cases take changes org compared
together actually isn starts effective implemented terminal globals larger pathname compiled final records
exponent waiting turtlescreen pip cfws readable servers handling ignore patterns creating considered keep
subclasses numeric references scripts avoid inf choices benchmarks avail filenames reset ids executable
fallback included posix chunks sign handles eager teardown storage hybrid trailing loading starting determined
page dst caller condition integers scheme sorted bool put differ processes wsgi curve aggregate verdict
various anything additional blank window statistics angle events compatibility sub determine did writes offset
sample requires en explicit older marker ppl behavior rather party followed formatting represents down recent
enough accepts runtimeerror init wheel vendors enable overridden safe repr func look derived red hash intended
leading construct versions boolean issue decoded tcp streaming printable bs transfer ensure temporary month
initial reads low compatible ratio implementations lemburg spaces attention health prefill possibly resulting
started copied associated says yield suitable unknown save creation had markers reason complex num newer
capped prose utf lineno meaning eval dump day outside algorithm known language normally correct small audio
blocking streams backend things typ req formats connect description fetch remote union step includes status
described particular pyc execution big tokenizer delay unit typing semaphore ar conftest readme goodput sweep
paris responses password pipe depending usually cause settings something fixed words libraries warnings ftp
catid comments metadata optionally recursively our row val good attr shell treated separated sources aliases
greedy serving four insert wrong scheduler stats successful appended extended basic tested very commit quote
factory direction cancelled streamed sse ports cpp mb oserror explicitly around skip therefore query store
third site completion yet interpreter fd component move installed exec authentication though parses pre follow
mm bind dot slot fit choice computed verbose forward scoring september changed sock keyed resource shows
action taken simply giving however extract processed less cgi divide disable entire proxy published fix logs
fetched deleted active database produce browser issues previous timestamp digest tell appear pos parts
concrete iso modes heading power sends thresholds yaml schema prometheus replaced depends legacy might week
recommended captured modified properties fullname symbol rounding dataclass runner kill oracle forced stdin
effect filter connections beginning comes copyright location bits compressed typically again candidate service
separator newlines yields sort instantiate timezone structure map behaviour cls timer ast aix tasks workers
assertion obs carries lane addition debugging stat head device platforms silently continue scope unique alias
bytecode addr turns saved aiff www duration utc select zipfile csv docstrings formatter acquire assumes
grammar ln payload annotations failures seven framework utils snapshot know micsft temperature tpot scratch
transformers bootstrap attempt filesystem free apply loaded related force say controls env builtin specifying
buffered flush others definition documented ctx junk selector containers cmd diff pen enforce proc defects
counters teacher quantization kl assumed hostname initialized rest owner gzip give unchanged rows best suffix
indent handled notes document pure clean defines wrapping nested heap mouse fillcolor watcher daily
interactive mixed resp article groups tries gets columns canonical loads array usable indicate children able
lookup represent hand holds logical tokenize us follows suite descriptors seed tarinfo filters positional
profile daemon kernel revision globs annotated anyio ai hookspec instruct jinja extensions searched systems
perform making tab controller functionality symlinks gnu semantics eg ie certain occurred longer comparing
switch embedded show cleanup twice live figure localhost fn rounded percentiles constant operands serves
success accuracy threading finder native ran polygon fun pencolor console multipart water leak quality
alternative iff wrap working disk debugger breakpoints locals fp components processing contained performed
human interpreted assigned label variance square come specification reduced quantize separately std abcd
importlib tag verify acquired elapsed sequencematcher rule box coroutines gap bash autoregressive argv seek
keeps partial constants won importerror appears minus column tried discarded double endian whenever comment
wraps operator shutdown sure quotes replacement sleep parsers finite purpose validate feature capacity checker
behind logrecord phrase probe lanes excerpt perf testdir threshold torchvision city iptables listed symbolic
maps destination variant describe successfully environ upon stops reached ones calculate inputs fileobj
produces aware quiet ends problems truncated individual pointer asynchronous await abs recursive kept dummy
clients family intermediate interpolation consists rounds channel collection me drawing circle leaf fake
provenance station divergence begin launcher becomes utility modification dependent break matrix tables green
blue goes detailed encountered netmask sdk updated half timing much gaps providing units become exp pretty
natural layout my engines barrier properly dbm cat instantiating cv coordinates checkers mydata targets
renders lang initialization dicts debian go view respectively days signals walk chain expanded lower levels
subtract counting regardless unlike marked labels unset helpers marc andre mal steps tabs matched regression
measure noise invalidoperation remainder got isinstance overhead frozen differences marks expect math tp
hardware launch question worse research usageerror reasoning entrypoints serverargs assistant pluginmanager
quant tenstorrent torchcodec tc endif apt disabled reader occur receive connected pdb finished printing ending
definitions grouping checking ordinary rendering broken sending vars remaining convenience xff higher
hierarchy retrieve really opcode rights escaped backslash probably duplicates calculated sum minimum ok digit
imports naming escapes implementing came subtype increase priority yes urllib rational endpoints fragment gen
ssm confidence further tls cached nor retrieved mapped general please glob thus specialized greater apis refer
applies converts compiles differs normalize dotted generally callbacks released strip tells limited problem
exits hh leave buffers predicate sockets modify strategy emit middle dataset comparisons discard metaclass
thin bottom bug mirror states checkpoint cancel invoked distance converting cost graphics configure banner
typeddict sentinel export schedule stable weight dflash mtp budget typical xxx unexpected dist skipped
subdirectories enabled home invoke web kind performance symlink copies weekday internally backward routine
terminated compares looked importing large independent reverse finally management later implicit sig jan why
dd codecs separators little produced mail forms mu denominator distributions abcs hold rotate virtual de
decorated whatever unlocked suffixes fine argparse accelerate ts carry app mocks ctrl defect od plots gates
deterministic pinned wording ngram repo histogram ramp zmq poisson genai osl cooldown recipes wikitext
perplexity quantized ggufconfig rss capital france rootfs iteration quit capabilities neither fall configured
var writable uncompressed generates prevent resolve knowledge hex iana sizes timedelta ss looks linesep opener
writer recognized beyond protocols inspect incomplete keeping chars guess reload master average percentile
coefficient detail consecutive getopt drop subsequent inexact subnormal infinite raising features tarfile
compact bare outline uri params pypi futures assertionerror fixers seats mla nextn lm opening rb appending
eoferror assume desired fork fast linux links latter happen dumps gmt inherited proper adding buffering
resolved fully few drive replacing router pydoc thing having guaranteed terms sep obtained usual bad
serialized locked certificate due often cnri escape causes streamreader onto struct floating spread population
conventions require exports fill placeholder edge baz prec sqrt division closer snan mix super expressions
period doing five completed popen limits overriding ehlo profiled ndiff unittest alphabet coordinate endpoint
resizemode profiling finish lose returncode mypy leaves loses testcase junit toml agent uninstall atom nightly
autotune flip cumulative accessed compliant username sometimes away portion copying dispatch someone prefixed
commonly applied corresponds optimization slow indentation detection ways emits sense smaller loopback
identifying describing utilities mixin attempts nearest chosen undefined decoder share sslcontext smallest
warranty measurement paramspec absent world roughly emin largest floor nonzero significant ls seq important
download comma enc terminate early handshake esmtp helo driven nobody asked arrays unc deltas claim markup
verified facing button macro msvc cancellation attach warns severity folding pc concern stash scored dp oom
ray plugins hookspecs dsession pyproject scoped routes peak baselines aiohttp isl chatml cores dequantize
speculation torchaudio cgroup bridge libertaidai experts subject selected distributed spam along uid
registering dictionaries trying indexed normalized property calendar convention attributeerror tmp allowing
idea executing yielding packed pow setpos preceding attached overrides incremental translate subset mechanism
memo wins themselves anchor keywords hidden probability sigma score attempted numerically integral hard
inserted direct said optionparser bodies accepting actions oct terminates didn drwxr xr initializer generation
tags instrument updates pensize parallel falls prefer overload gamma killed verification ccompiler stays
argmax triton served towards extracted cfg reasons background registers unpack debugged breaks backwards
floats hello apple iterate slightly feed ask conditions likely optimize compilation looking shown longest
upper unspecified identifier triggered unsupported architecture stuff channels namedtuple multiply formal
inherit layer indicated encoder magic dirs listen purposes assuming login streamwriter unused deviation
arithmetic interval covariance represented equals percent overlap collections hashable occurrences occurrence
colon ll emax equality computation shift places deep instantiated relevant scheduled remain finders warn
telnet flow blocked logic machinery reuse mounted collect shapes turtles colormode turtleshape stamp declared
repeats pp uniform boundary synchronous datagram macros linker renamed cancellederror paired mocked logged
loggers fragments fws drafter crashes dgx modelopt measurably turned reply supporting stripping mac mailcap
interfaces netscape notice slash amount completely care plist bytearray affect ab compresslevel minimal safely
lets stripped invocation padded notation zone caught cm correctly listing frequency detected physical
especially alive fold yyyy localtime triple signatures passes determines lzma pickled pop delimiter meta
respect design push attrs pick alone intervals correlation fractions faster normaldist finds depend wants
paragraph modulo apart zeros padding shallow vector dest restore meant cleared pkg deal alpha abort prior ever
wake bunch scheduling pipeline linked branch producing complicated logo drawn undo startup title answer
disposition mkdir favor reach multiprocessing jsonencoder microsoft receiving nicer simplecookie multicall
twin verdicts pin prob harness sim bootfacts simulator tokenized forks piecewise uvicorn eagle nemo kimi
dynamo newhooks filelock benchmarksession stddev firstresult addini freeportfactory replay gave llmperf actors
hf cells eos mcnemar parity regressions kld calibration competitor llmgate pss dl autotokenizer cold
containerd httpd fi rm moved connecting duplicate security hint consisting exclude overwritten rename cross
compress xz gz lambda cell hexadecimal eight operating responsible customized upstream schemes encodings
taking pointing alternate depth rendered tail specifier continuous enables customize aifc ints op operators
detect ref tzinfo exclusive legal treat declare targetpath keyfile subclassed folder changing visible encodes
happens indented decide let ellipsis intercept letters compound computing almost alignment nans product
excluding expressed acts mro adapter excluded visual cookbook timeit repeat timed preset matters front
repeated gif cooked ordered visitor guard recursion nt specifically passwd configparser gram unified
splitlines showing suites degrees replaces draw shearfactor six routed bpnumber purepath cover phase
assertequal expose rollover scenarios maxlinelen cte matcher github closes perhaps correspond strictly remains
nntp descriptions concatenated capability wildcard appends prefixes installation pth browsers sendfile
archives removes entered pages triples textiowrapper truncate mtime similarly closing patches category
releases nbytes syntaxerror expand displayed resets contexts arch mutable makefile prepended writeframesraw
writeframes programs trip invariant garbage tr consider ignoring translated newly necessarily incompatible
consumed preceded epoch transparent introspection dynamically symbols minor rates cut origin soon validation
closest approximation representable reduces resolution initially functools saves building annotation util
queued se identified resources validated feb crash backslashes bugs rejected del sync resume drops getter
regen testmod doctests capturing subclassing merged mostly demo clicked drawings orientation route spent
generators proposed dropped libfoo fault cc transports mixins flushed prototype asserttrue unquoted recommends
receives critical appeared tokenlist automaton binds uncertainty contrast agg vibes told reproduce community
tax kda forty maxbs fileinput backup fileno overview lf chmod fifo automatic gid credits controlling internet
efficient permission caused pathlike act sessions wb years cpython previously traces refers representations
networks bitwise hosts subsequently suppress managers enters universal gcc rewind sampling samples setparams
patched repeatedly milliseconds choose opens ensures dots enter locks certfile pem dis delimited enclosed
approach mbox fresh render serverthread texts external major slope numerator yielded zipimporter overflowerror
literals applications traps signaling conform nonnegative defining issubclass char uname retained reduce
constructed maxsize easier brief blanks ctypes located preferred past idle unread white continuation
structures among prepare sendmail manages multiline sensitive holding pull argumentparser guide pulls
optionflags segments reporting animation movement rawturtle installs radius shapesize tilt elif gather spawn
quotation sigterm wrappers exponential divided dirpath dirnames dll serialize flushing fs dlopen asserts
magicmock observed existed cursor robots claimed notebook knob markdown contracts gated candidates bootlog
workflow echoes surface bootlogs deepseek impl club reqs standalone cudagraph specdecoding detokenize
readiness minimax cited git colin ionelmc looponfail ruff getgroup launches makepyfile runpytest tableresults
backends regressioncheck expr iqr paste ships getoption scraping formula guidance tiny np ttfts plot gpustack
credit avg histograms workloads rtt saw wall httpx mmlu wilson inflation tokenizing agentic vocab rms
vocabulary safetensors whl smol appendix harmless chatcmpl nat tpl endfor localtest ro apierror rf defaulting
sequential crlf describes mentioned disables combine lowercase basename tracing sun handy saturation rt supply
mkstemp accessible exceeds account portable compiling knows reasonable framesummary shorthand repetitions
slashes loops ffff dns reachable mask asynchronously dynamic unmodified wave designed transform terminating
stopiteration tz ordinal hour minute dt minutes applicable hits lead endings iobase rawiobase piece terminator
issued tty zipinfo domains incoming highest meets band remembers retr nb octets codes quoting pending
appropriately documents topic fnmatch pvariance km nominal measures estimated agreement leaving software
recognize breaking fits preserved derive construction precedence near restrictions violated divmod filled
afterwards permissions statements submodule abstractmethod avoids hide processor nearly metavar nargs earlier
intel unregister instruction chains constructs routines authobject identify concatenation profiler manage
synchronization awakened secure refused transaction validity bcc aka persistent datatype proxies substitutions
potential deals interesting shortest extent adjacent anchors click splitting doctestrunner controlled
doctestparser methodcaller pixels images center arrow lt stretchfactor joe circular accessing forces classvar
concatenate typevar caching damage trick beta unlink services externally serializable msvccompiler lives
exported asks upgrade eventually oss resolves autospec illegal bnf reject loaders rely delegate locally packet
packing curses printables subparts surrogateescaped fixer subtracts briefing seat attn proposes probabilities
sizing honest explains ops nous workload crossover layers embeddings reserves anthropic nc advice stopped
presence dos xx decodes netrc cr queries anyway insensitive history unsafe connector syscall onerror former
evaluated condensed pl lots monday sunday covers hmac hashing xb shouldn shot worth implied stringio iterables
attempting consistent nesting ipv easily tracebacks alternatively compilers helpful destroyed interested
begins expects weak finalizer atexit microsecond cl east displaying tracer placed whence far satisfy although
seeking posixpath abcde qualified transmit detach fds pickler misc noop cycles unlock greeting maildir mh mmdf
numbering cur decoders decimals traffic ten explained area exhausted slice zipimporterror wasn underflow
formed adjusted numerical bounded commas scale ordering shifted ibm logb simplest essentially getmembers
increasing ed callables computes const sf submodules face undocumented obsolete poll lazy happened ignores
getattr anywhere cycle varargs varkw stores parentheses rfcs envelope namespaces certificates deprecation
binding wanted visit meth sound law reentrant notify parties exited builddate predecessors recipient win
reliable substitute allocation continuations delimiters converter clone pm prevents assign consumes storing
notion catches readlines writelines contextual author fact completes binascii elsewhere corner height dialog
pendown shear became assignment timings periods enumeration lo course timeouts enforced covariant employee udp
periodic completer evaluation basis job alongside exe cmdclass strictversion versionpredicate truth awaited
listening proactor overlapped reliably lost factories arrival rewrite sharing testsuite phrases basicconfig
effectively refactored tolerant forcing tracker latest attachment exclusion dtext maintype reproduces chainmap
flips bias filtering inplace fmt cf suggested inclusion builtins mozilla readinto aren cp pointed unavailable
unable pack invoking brackets unrelated rgb hashlib lacks bufferediobase race deleting setlocale thousands
maintain accesses efficiency stacksummary oldest opposite urls mount eliminating combination summarize
collapsed wish ipaddress hostmask multicast ranges octet additionally scan sysconfig salt unusable seekable
bom exposes considering strftime positions merge who translation varies bufferedreader blockingioerror imply
moment compressor parents zf letter primitive pwd exceed proto pickling auth established malformed classic
offsets insofar lookuperror primarily uniformly feeding asking monitor pty grouped statisticserror odd age
everyone separating estimate relationship overlapping mod helps couldn aspects punctuation joined entirely
expectations dig getcontext qnan recorded pad aligned internals fma affected scaleb caches pax prepend
searching measuring executes lzmafile invokes applying distinct adapted inferred bases technique practical
communication easy conflicting prog generating perl mainly kwarg opcodes disassembly variants maybe guido sb
optimized partially performs alert fair aug semaphores activity excludes owns bos dependencies dependency
asserted guessed coming db interpretation simulated consumer qsize anonymous facts sections preserves heappop
cd executables patchlevel relies emitted percentage diffs keepends pprint linejunk ore testresults
doctestfailure extraglobs verbosity incorrectly adobe appearance tkinter undobuffer oriented covered focus
alter correction onclick goto radians noresize jump tiltangle knew boilerplate manipulating picklable
getstatusoutput expired miscellaneous unions sql injection typeguard typevartuple stub userid disassemble cvs
polls exposed timestamps duplicated javascript hinting tied dry eventloop pause concurrently allocate
asyncmock httpconnection redirect capable streamhandler versionchanged carried refactoring transmission
categories forever fixing relocated ptext ctext watch atext qp attrtext maxheaderlen failobj refolded realname
invocant abbb aesthetics beside ours newcomer loudly pools toolcalls png factor fatal cand queueing corpora
"""
