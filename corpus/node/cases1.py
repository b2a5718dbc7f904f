exec(open('/tmp/p23/mk.py').read())
case('engine', 'runpod-voxtral-mini-please-install-vllm-audio',
"""[info]--- Starting Serverless Worker |  Version 1.7.13 ---\\n
[info]Jobs in queue: 1
[info]Jobs in progress: 1
[info]INFO 10-09 08:58:50 [chat_utils.py:473] Detected the chat template content format to be 'string'. You can set `--chat-template-content-format` to override this.\\n
[info]tekken.py           :540  2025-10-09 08:58:51,169 Vocab size: 150000\\n
[info]tekken.py           :544  2025-10-09 08:58:51,171 Cutting vocab to first 130072 tokens.\\n
[warning]WARNING 10-09 08:58:51 [chat_utils.py:376] 'add_generation_prompt' is not supported for mistral tokenizer, so it will be ignored.\\n
[warning]WARNING 10-09 08:58:51 [chat_utils.py:380] 'continue_final_message' is not supported for mistral tokenizer, so it will be ignored.\\n
[error]Please install vllm[audio] for audio support
[info]Finished.
""", 'https://github.com/runpod-workers/worker-vllm/issues/223', 'vllm', 'plain',
'issue body, "Error" block: RunPod serverless worker transcribing with Voxtral-Mini-3B through /chat/completions',
'vllm-audio-extra-not-installed', 9)

case('engine', 'vllm-whisper-transcription-importerror-install-vllm-audio',
"""I'm able to set up the container without any issue, but when I'm trying to send requests to '/v1/audio/transcriptions', I got the following import error: 

ImportError: Please install vllm[audio] for audio support
""", 'https://github.com/vllm-project/vllm/issues/13675', 'vllm', 'plain',
'issue body: vllm/vllm-openai:latest serving openai/whisper-large-v3-turbo with --task=transcription',
'vllm-audio-extra-not-installed', 3)

case('engine', 'neutree-qwen3-asr-vllm-openai-image-audio-extra-missing',
"""ImportError: Please install vllm[audio] for audio support
""", 'https://github.com/neutree-ai/neutree/pull/465', 'vllm', 'plain',
'PR description, Problem section: vllm-openai base image without the audio extra, ASR endpoint (Qwen3-ASR-1.7B, vLLM 0.17.1) fails at request time; fixed by adding librosa + soundfile',
'vllm-audio-extra-not-installed', 1)

case('engine', 'vllm-orin-source-build-please-install-vllm-audio',
""" I compiled  vllm on orin during 5 hours， then I run a example， get result:【Please install vllm[audio] for audio support】，how to fix it without re-compile.  thanks!
""", 'https://github.com/vllm-project/vllm/issues/23232', 'vllm', 'plain',
'issue body: vLLM built from source on Jetson Orin, running an audio example; maintainer: pip install librosa soundfile',
'vllm-audio-extra-not-installed', 1)

case('engine', 'vllm-022-audio-extra-hint-hidden-invalid-audio-file',
"""**Before:**
```json
{"message": "Invalid or unsupported audio file.", "code": 400}
```

**After:**
```json
{"message": "Please install vllm[audio] for audio support", "code": 500}
```
""", 'https://github.com/vllm-project/vllm/pull/44750', 'vllm', 'plain',
'PR description (fix for vllm#44746): the API response without the audio extra before the fix (generic 400) and after it (the install hint)',
'vllm-audio-extra-not-installed', 3)

case('engine', 'logos-whisper-worker-invalid-or-unsupported-audio-file',
"""{"error": {"message": "Invalid or unsupported audio file."}}
""", 'https://github.com/ls1intum/edutelligence/issues/925', 'vllm', 'plain',
'issue body, Symptom: every /v1/audio/transcriptions request to a vLLM 0.28.0 Whisper worker returns this 400 for valid WAV/MP3/FLAC; root cause in the thread: the worker image installs vllm without the audio extra (no soundfile/av)',
'vllm-audio-extra-not-installed', 1)
