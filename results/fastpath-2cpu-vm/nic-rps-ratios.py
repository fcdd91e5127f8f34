#!/usr/bin/env python3
# Ratios of nic-rps-ab.sh's benches: each run over the run of the same
# index in the same round's other bench (or its own bench's vanilla),
# geometric mean with a 95 % Student t interval on the logarithms.
# Usage: nic-rps-ratios.py DIR [ROUNDS]
import json,math,statistics as st,sys
d=sys.argv[1]; n=int(sys.argv[2]) if len(sys.argv)>2 else 3
def load(tag,i):
    out={}
    for r in json.load(open('%s/%s-%d.json'%(d,tag,i)))['results']:
        out[(r['workload'],r['mode'])]=[x['gbps'] if r['workload']=='tcp' else x['pps'] for x in r['runs']]
    return out
T={2:12.71,3:4.30,4:3.18,5:2.78,6:2.57,7:2.45,8:2.36,9:2.31,10:2.26,11:2.23,12:2.20}
def ci(l):
    m=st.mean(l); s=st.stdev(l)/math.sqrt(len(l)); t=T.get(len(l),2.2)
    return math.exp(m),math.exp(m-t*s),math.exp(m+t*s)
for w in ['udp-stress','tcp']:
    for num,den in [(('vanilla','on'),('vanilla','off')),(('fastpath','off'),('vanilla','off')),(('fastpath','on'),('vanilla','off')),(('fastpath','on'),('vanilla','on')),(('fastpath','on'),('fastpath','off'))]:
        l=[]
        for i in range(1,n+1):
            a=load(num[1],i)[(w,num[0])]; b=load(den[1],i)[(w,den[0])]
            l+= [math.log(x/y) for x,y in zip(a,b)]
        g,lo,hi=ci(l)
        print('%-10s %s/%s over %s/%s: %.2f (%.2f-%.2f) n=%d'%(w,num[0],num[1],den[0],den[1],g,lo,hi,len(l)))
