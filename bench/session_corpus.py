"""A seeded, deterministic corpus of agent sessions for the session-archive benchmark.

Shape (the method of perf-baseline.md section 1): a 20,000-word vocabulary with a Zipf
distribution (a real English/tech head, synthetic tail words); sessions of about 40 messages
made of turns: a user ask, an assistant tool call with JSON arguments in 60% of turns followed by
one or two tool outputs, then an assistant answer; message lengths log-uniform; about 3% of
messages carry CJK text. The first messages are the same whatever the corpus size, so the query
set (drawn from them) is the same for every N.
"""

from __future__ import annotations

import bisect
import itertools
import math
import random
from collections.abc import Iterator
from dataclasses import dataclass

from hermes_core.types import Message, ToolCall

__all__ = ["Corpus", "QuerySet"]

HEAD = """
the be to of and a in that have it for not on with he as you do at this but his by from they we
say her she or an will my one all would there their what so up out if about who get which go me
when make can like time no just him know take people into year your good some could them see
other than then now look only come its over think also back after use two how our work first
well way even new want because any these give day most us file error code function test build
server request response data value config path user session message model token memory context
search index query result debug deploy commit branch merge release version module package import
class method string list table database cache service client api endpoint timeout retry log
output input line column field type schema record update delete insert select create start stop
run check fix issue bug patch change review docs install upgrade network port host container
image docker kubernetes cluster node pod volume secret key auth login password permission access
thread process memory disk cpu load latency throughput benchmark metric alert trace span event
queue worker job task schedule cron backup restore migrate sync async await stream buffer socket
""".split()  # noqa: SIM905 - a word list reads better as text

SYLLABLES = """
ka ri to mo ne sa lu vi po de an el or ix um ter van gor bel sin dra kel mor tri zan qui fol hem
nax pil rud sov tek wim yor ba ce fi go hu
""".split()  # noqa: SIM905 - a word list reads better as text

CJK_WORDS = """
部署 服务 数据库 配置 错误 日志 用户 会话 搜索 索引 性能 测试 缓存 网络 容器 集群
版本 发布 修复 问题 代码 文件 目录 权限 密码 登录 接口 请求 响应 超时 重试 队列
任务 调度 备份 恢复 迁移 同步 异步 内存 磁盘 延迟 吞吐 指标 告警 今天 明天 我们
你们 已经 需要 可以 因为 所以 但是 如果 然后 设定 確認 変更 実行 設定 ファイル
サーバー データ エラー テスト メモリ 검색 서버 데이터 오류 설정 로그 사용자
""".split()  # noqa: SIM905 - a word list reads better as text

TOOLS = ("read_file", "write_file", "terminal", "search_files", "web_search", "patch")


@dataclass
class QuerySet:
    plain: list[str]
    common: list[str]
    cjk_long: list[str]
    cjk_short: list[str]


class Corpus:
    """``sessions()`` yields (session_id, [Message, ...]) forever, deterministically."""

    def __init__(self, seed: int = 1234, vocab_size: int = 20_000) -> None:
        self.seed = seed
        rng = random.Random(seed)
        tail: set[str] = set()
        while len(tail) < vocab_size - len(HEAD):
            n = rng.choice((2, 2, 3, 3, 4))
            tail.add("".join(rng.choice(SYLLABLES) for _ in range(n)))
        self.vocab = list(dict.fromkeys(HEAD)) + sorted(tail)
        rng.shuffle(self.vocab[len(HEAD):])
        self.cum = list(itertools.accumulate(1.0 / (r + 1) for r in range(len(self.vocab))))

    def words(self, rng: random.Random, k: int) -> list[str]:
        total = self.cum[-1]
        vocab, cum = self.vocab, self.cum
        return [vocab[bisect.bisect_left(cum, rng.random() * total)] for _ in range(k)]

    def text(self, rng: random.Random, lo: int = 40, hi: int = 1800) -> str:
        length = int(math.exp(rng.uniform(math.log(lo), math.log(hi))))
        out: list[str] = []
        size = 0
        while size < length:
            w = self.words(rng, 12)
            out.extend(w)
            size += sum(map(len, w)) + 12
            out[-1] += rng.choice((".", ",", "?", "", "", ":"))
        text = " ".join(out)[:length]
        if rng.random() < 0.03:
            cjk = "".join(rng.choice(CJK_WORDS) for _ in range(rng.randint(3, 20)))
            cut = rng.randint(0, len(text))
            text = text[:cut] + " " + cjk + " " + text[cut:]
        return text

    def session(self, rng: random.Random, index: int) -> tuple[str, list[Message]]:
        sid = f"bench-{self.seed}-{index:08d}"
        target = max(6, int(rng.gauss(40, 12)))
        msgs: list[Message] = []
        t = 1_700_000_000.0 + index * 3600.0
        call = 0
        while len(msgs) < target:
            t += 5
            msgs.append(Message(role="user", content=self.text(rng, 30, 900), timestamp=t))
            if rng.random() < 0.6:
                call += 1
                tool = rng.choice(TOOLS)
                w = self.words(rng, 4)
                args: dict[str, object] = (
                    {"path": f"/src/{w[0]}/{w[1]}.py", "limit": rng.randint(10, 500)}
                    if tool in ("read_file", "write_file", "patch")
                    else {"command": " ".join(w), "timeout": 30}
                    if tool == "terminal" else {"query": " ".join(w[:3])}
                )
                cid = f"toolu_{rng.getrandbits(64):016x}"
                msgs.append(Message(role="assistant", content=self.text(rng, 10, 120),
                                    tool_calls=[ToolCall(id=cid, name=tool, arguments=args)],
                                    timestamp=t + 1))
                for _ in range(rng.choice((1, 1, 2))):
                    msgs.append(Message(role="tool", content=self.text(rng, 40, 2000),
                                        tool_name=tool, tool_call_id=cid, timestamp=t + 2))
            msgs.append(Message(role="assistant", content=self.text(rng), timestamp=t + 3))
        return sid, msgs

    def sessions(self, start: int = 0) -> Iterator[tuple[str, list[Message]]]:
        for i in itertools.count(start):
            yield self.session(random.Random(f"{self.seed}:{i}"), i)

    def queries(self, sample_messages: list[Message], seed: int = 99) -> QuerySet:
        """50 plain queries (40 co-occurring 1-3 words, 10 very common words), 20+20 CJK."""
        rng = random.Random(seed)
        rank = {w: i for i, w in enumerate(self.vocab)}
        texts = [m.content for m in sample_messages if len(m.content) > 80]
        plain: list[str] = []
        while len(plain) < 40:
            words = [w.strip(".,?:").lower() for w in rng.choice(texts).split()]
            words = [w for w in words if w in rank and 40 <= rank[w] < 6000]
            if words:
                plain.append(" ".join(rng.sample(words, min(len(words), rng.randint(1, 3)))))
        common_pool = [w for w in HEAD[100:] if w in rank][:40]
        common = [" ".join(rng.sample(common_pool[:15], rng.randint(1, 2))) for _ in range(10)]
        from hermes_core.plugins.memory.session_archive.cjk import split_cjk

        runs = [p for m in sample_messages for is_cjk, p in split_cjk(m.content) if is_cjk]
        long_runs = [r for r in runs if len(r) >= 4]
        cjk_long, cjk_short = [], []
        for _ in range(20):
            r = rng.choice(long_runs)
            n = rng.randint(3, min(6, len(r)))
            i = rng.randint(0, len(r) - n)
            cjk_long.append(r[i : i + n])
            r = rng.choice(runs)
            n = rng.randint(1, min(2, len(r)))
            i = rng.randint(0, len(r) - n)
            cjk_short.append(r[i : i + n])
        return QuerySet(plain + common, common, cjk_long, cjk_short)
